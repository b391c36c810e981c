"""``jev serve --keep-states FILE``: each answered request's state, a line per question, in the form ``jev calibrate``
reads; nothing for a refused request; whole lines from concurrent writers; a file that stops at its limit while the
gateway keeps answering; a bad path refused at the door. Over real HTTP on loopback in front of the stub backend,
and the loop closed on the embedded model: states kept by the gateway, then ``jev calibrate`` on the file."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import httpx
import pytest

from jev_shared.calibration import Calibrator
from jev_shared.cli import main
from jev_shared.gateway.config import Backend, GatewayConfig
from jev_shared.gateway.kept_states import StateLog
from tests.gateway.conftest import KEY, MODEL, config_for, running
from tests.helpers.cli import jev, one_line_exit_2

pytestmark = pytest.mark.timeout(120)

AUTH = {"authorization": f"Bearer {KEY}"}
QUESTIONS = {"spam": {"type": "noul", "instructions": "This is spam."},
             "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "", "technical": ""}}}


def post(url: str, state, questions=QUESTIONS) -> httpx.Response:
    return httpx.post(url + "/v1/systemone", headers=AUTH, timeout=30,
                      json={"model": MODEL, "state": state, "questions": questions})


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_each_answered_state_is_kept_a_line_a_question(stub, tmp_path):
    kept = tmp_path / "states.jsonl"
    states = ["refund me want=billing truth=no", {"subject": "crash", "body": "want=technical"}]
    with running(config_for(stub, keep_states=kept, max_questions=2)) as url:
        for state in states:
            assert post(url, state).status_code == 200
        assert post(url, "three questions", {**QUESTIONS, "x": QUESTIONS["spam"]}).status_code == 422  # refused
        assert post(url, "", QUESTIONS).status_code == 422  # no state: refused before the engine
    assert lines(kept) == [{"state": s, "question_id": q} for s in states for q in ("spam", "team")]


def test_without_the_flag_nothing_is_written(stub, tmp_path):
    with running(config_for(stub)) as url:
        assert post(url, "x truth=no").status_code == 200
    assert list(tmp_path.iterdir()) == []


class Said(logging.Handler):
    """The messages a logger emits, whether or not it propagates (jev serve's logging may stop it)."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_file_stops_at_its_limit_and_the_gateway_keeps_answering(stub, tmp_path):
    kept = tmp_path / "states.jsonl"
    one = len(json.dumps({"state": "a truth=no", "question_id": "spam"}, separators=(",", ":"))) + 1
    gateway_log, said = logging.getLogger("jev_shared.gateway"), Said()
    gateway_log.addHandler(said)
    try:
        with running(config_for(stub, keep_states=kept, keep_states_max_bytes=3 * one)) as url:
            for _ in range(5):
                assert post(url, "a truth=no", {"spam": QUESTIONS["spam"]}).status_code == 200
    finally:
        gateway_log.removeHandler(said)
    assert len(lines(kept)) == 3 and kept.stat().st_size == 3 * one
    assert sum("--keep-states-max-bytes" in m for m in said.messages) == 1  # said once


def test_writers_in_parallel_write_whole_lines(tmp_path):
    kept = tmp_path / "states.jsonl"
    logs = [StateLog(kept), StateLog(kept)]  # two workers' logs on one file
    state = "x" * 5000  # longer than one write of a pipe's atomic size

    def write(n: int) -> None:
        for i in range(20):
            logs[n % 2].keep(f"{n}-{i} {state}", ["a", "b"])
    threads = [threading.Thread(target=write, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = lines(kept)
    assert len(got) == 6 * 20 * 2 and {g["state"].split(" ")[0] for g in got} == {f"{n}-{i}" for n in range(6)
                                                                                    for i in range(20)}


@pytest.mark.parametrize("where", ["missing/states.jsonl", ".", "link"])
def test_a_path_that_cannot_be_kept_is_refused_at_the_door(tmp_path, where):
    (tmp_path / "target").write_text("")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    out = jev("serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", MODEL,
              "--keep-states", str(tmp_path / where), env={"JEV_API_KEYS": KEY})
    one_line_exit_2(out, "--keep-states")


def test_a_limit_of_zero_is_refused_at_the_door():
    out = jev("serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", MODEL, "--keep-states", "x.jsonl",
              "--keep-states-max-bytes", "0", env={"JEV_API_KEYS": KEY})
    one_line_exit_2(out, "--keep-states-max-bytes")


@pytest.mark.live
def test_serve_keep_states_then_calibrate_closes_the_loop_with_no_label(local_server, tmp_path, capsys):
    rows = [json.loads(line) for line in (Path(__file__).resolve().parents[2] / "bench" / "data" / "spam.jsonl")
            .read_text().splitlines()]
    spam = {"spam": {"type": "noul", "instructions": "This message is spam."}}
    kept, questions, out = tmp_path / "kept.jsonl", tmp_path / "q.json", tmp_path / "cal.json"
    questions.write_text(json.dumps(spam))
    config = GatewayConfig(backends={local_server.model: Backend(local_server.base_url, local_server.model)},
                           keep_states=kept, cache=False)
    with running(config) as url:
        for r in rows:
            resp = httpx.post(url + "/v1/systemone", timeout=60,
                              json={"model": local_server.model, "state": r["text"], "questions": spam})
            assert resp.status_code == 200, resp.text
    assert lines(kept) == [{"state": r["text"], "question_id": "spam"} for r in rows]
    assert main(["calibrate", str(kept), "--questions", str(questions), "--out", str(out),
                 "--backend-url", local_server.base_url, "--model", local_server.model]) == 0
    assert f"spam: {len(rows)} states; lean true " in capsys.readouterr().out
    assert set(Calibrator.load(out).biases["spam"]) == {"true", "false"}


def test_the_decisions_wire_keeps_its_input_under_each_question_name(stub, tmp_path):
    kept = tmp_path / "states.jsonl"
    questions = [{"type": "predicate", "name": "spam", "instructions": "This is spam."},
                 {"type": "choice", "name": "team", "instructions": "Which team?",
                  "choices": [{"value": "billing"}, {"value": "technical"}]}]
    with running(config_for(stub, keep_states=kept)) as url:
        resp = httpx.post(url + "/v1/decisions", headers=AUTH, timeout=30,
                          json={"model": MODEL, "input": "refund me want=billing truth=no", "questions": questions})
    assert resp.status_code == 200, resp.text
    assert sorted((line["state"], line["question_id"]) for line in lines(kept)) == [
        ("refund me want=billing truth=no", "spam"), ("refund me want=billing truth=no", "team")]
