"""``jev decide --input``, run as a subprocess against the loopback stub: the log, resume, kill, summary."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from bench.batch_data import ROUTING, write_csv, write_questions
from tests.batch.conftest import QUESTIONS

pytestmark = pytest.mark.slow  # every test here starts a subprocess or a server (seconds each): scripts/test.sh --full runs them


def jev_cmd() -> list[str]:
    return [sys.executable, "-m", "jev_shared.cli"]


def jev(*args: str) -> subprocess.CompletedProcess:
    """The ``jev`` command in a subprocess (the gateway tests' helper needs the serve extra; this does not)."""
    return subprocess.run([*jev_cmd(), *args], capture_output=True, text=True, timeout=120)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def decide(stub, tmp_path: Path, inp: Path, *extra: str, questions: dict | None = None):
    qpath = tmp_path / "questions.json"
    qpath.write_text(json.dumps(questions or QUESTIONS))
    return jev("decide", "--input", str(inp), "--questions", str(qpath), "--output", str(tmp_path / "answers.jsonl"),
               "--backend-url", stub.base_url, "--model", "m", *extra)


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


ROWS = [{"id": "a", "state": "want=billing truth=yes"}, {"id": "b", "state": "want=technical truth=no"},
        {"id": 3, "state": {"subject": "refund", "body": "want=billing"}}]


def test_a_jsonl_batch_logs_one_line_per_id_with_its_own_answers(stub, tmp_path):
    out = decide(stub, tmp_path, write_jsonl(tmp_path / "in.jsonl", ROWS))
    assert out.returncode == 0, out.stderr
    lines = {json.dumps(rec["id"]): rec for rec in log_lines(tmp_path / "answers.jsonl")}
    assert set(lines) == {'"a"', '"b"', "3"} and stub.requests == 2 + 6  # prepare's, then the items'
    assert "jev decide: prepared 2 question(s): 2 call(s)" in out.stderr  # one line, before the bar
    assert lines['"a"']["answers"]["team"]["choice"] == "billing" and lines['"a"']["answers"]["spam"]["noul"] > 0.9
    assert lines['"b"']["answers"]["team"]["choice"] == "technical" and lines['"b"']["error"] is None
    assert lines['"b"']["usage"]["n_calls"] == 2
    summary = json.loads(out.stdout)
    assert summary["answered"] == 3 and summary["run"]["decisions"] == 6 and summary["run"]["input_tokens"] == 300
    assert "item/s" in out.stderr and "3 answered" in out.stderr  # tqdm's bar (rate, ETA), then the summary


def test_a_rerun_skips_what_is_in_the_log(stub, tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    assert decide(stub, tmp_path, inp).returncode == 0
    stub.reset()
    again = decide(stub, tmp_path, inp)
    assert again.returncode == 0 and stub.requests == 0
    assert json.loads(again.stdout)["skipped"] == 3 and len(log_lines(tmp_path / "answers.jsonl")) == 3


def test_failures_are_logged_by_type_and_retried_only_when_asked(stub, tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", [*ROWS, {"id": "x", "state": "#boom# want=billing"}])
    first = decide(stub, tmp_path, inp, questions={"team": QUESTIONS["team"]})
    assert first.returncode == 1 and json.loads(first.stdout)["failed"] == {"backend_error": 1}
    [bad] = [r for r in log_lines(tmp_path / "answers.jsonl") if r["id"] == "x"]
    assert bad["answers"] is None and bad["error"]["type"] == "backend_error" and bad["error"]["status_code"] == 500
    stub.reset()
    assert decide(stub, tmp_path, inp, questions={"team": QUESTIONS["team"]}).returncode == 0 and stub.requests == 0
    inp.write_text(inp.read_text().replace("#boom# ", ""))  # the fault is gone
    fixed = decide(stub, tmp_path, inp, "--retry-failed", questions={"team": QUESTIONS["team"]})
    assert fixed.returncode == 0 and stub.requests == 1 + 1  # prepare, then the retried item
    assert json.loads(fixed.stdout)["answered"] == 4 and json.loads(fixed.stdout)["failed"] == {}


def test_a_csv_column_and_the_review_queue_of_unsure_choices(stub, tmp_path):
    inp = tmp_path / "in.csv"
    inp.write_text("ticket,body\nk1,want=billing\nk2,want=nobody: no option in the window\n")
    out = decide(stub, tmp_path, inp, "--column", "body", "--id-column", "ticket", "--method", "grammar",
                 questions=ROUTING)
    assert out.returncode == 0, out.stderr
    assert stub.requests == 1 + 2 and all("grammar" in body for body in stub.bodies)  # --method reached the wire
    summary = json.loads(out.stdout)
    assert summary["below_threshold"]["team"] == {"answered": 2, "below": 1, "share": 0.5}
    review = log_lines(tmp_path / "answers.review.jsonl")
    assert [(r["id"], r["question"]) for r in review] == [("k2", "team")] and review[0]["confidence"] < 0.5


def test_dry_run_counts_requests_and_tokens_and_sends_nothing(stub, tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out = decide(stub, tmp_path, inp, "--dry-run")
    assert out.returncode == 0 and stub.requests == 0 and not (tmp_path / "answers.jsonl").exists()
    report = json.loads(out.stdout)
    assert (report["to_decide"], report["requests"], report["output_tokens"]) == (3, 6, 6)
    assert report["input_tokens"] > 0 and "6 requests" in out.stderr


def test_bad_input_is_refused_before_any_request(stub, tmp_path):
    dup = write_jsonl(tmp_path / "dup.jsonl", [ROWS[0], ROWS[0]])
    out = decide(stub, tmp_path, dup)
    assert out.returncode == 2 and "ids must be unique" in json.loads(out.stderr)["error"]["message"]
    csv_in = tmp_path / "in.csv"
    csv_in.write_text("id,body\n1,x\n")
    out = decide(stub, tmp_path, csv_in, "--column", "text")
    assert out.returncode == 2 and "columns: ['id', 'body']" in out.stderr
    bad = {"u": {"type": "score", "instructions": "How urgent?", "criteria": ["now"]}}
    out = decide(stub, tmp_path, write_jsonl(tmp_path / "in.jsonl", ROWS), questions=bad)
    assert out.returncode == 2 and json.loads(out.stderr)["error"]["field"] == "questions.u.criteria"
    both = jev("decide", "--state", "x", "--input", str(dup), "--questions", "{}")
    assert both.returncode == 2 and stub.requests == 0


def wait_for(cond, what: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def complete_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


def test_killed_half_way_and_resumed_no_item_twice_none_lost(stub, tmp_path):
    """1,000 labelled rows; the backend freezes after 500 requests; SIGKILL; rerun; count."""
    rows = write_csv(tmp_path / "tickets.csv", 1000, want_marker=True)
    args = ["decide", "--input", str(tmp_path / "tickets.csv"), "--column", "text", "--questions",
            str(write_questions(tmp_path / "q.json")), "--output", str(tmp_path / "answers.jsonl"),
            "--backend-url", stub.base_url, "--model", "m", "--concurrency", "4", "--no-progress"]
    stub.hold_after = 501  # prepare's one request, then 500 items
    proc = subprocess.Popen([*jev_cmd(), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ}, start_new_session=True)
    try:
        log = tmp_path / "answers.jsonl"
        wait_for(lambda: stub.requests == 505 and complete_lines(log) == 500, "500 lines and 4 held requests")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        stub.release.set()
        if proc.poll() is None:
            proc.kill()
    before = log_lines(log)
    stub.reset()
    resumed = subprocess.run([*jev_cmd(), *args], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    after = log_lines(log)
    ids = Counter(r["id"] for r in after)
    assert len(before) == 500 and stub.requests == 1 + 500  # the rerun asked only for the 500 not in the log
    assert len(after) == 1000 and max(ids.values()) == 1 and set(ids) == {r["id"] for r in rows}
    labels = {r["id"]: r["label"] for r in rows}
    assert all(r["answers"]["team"]["choice"] == labels[r["id"]] for r in after)  # each id kept its own answer
    assert json.loads(resumed.stdout)["skipped"] == 500


def test_a_torn_last_line_is_cut_off_and_its_item_decided_again(stub, tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    log = tmp_path / "answers.jsonl"
    assert decide(stub, tmp_path, inp).returncode == 0
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:2]) + lines[2][: len(lines[2]) // 2])  # killed mid-write
    stub.reset()
    out = decide(stub, tmp_path, inp)
    assert out.returncode == 0 and stub.requests == 2 + 2  # prepare, then the torn item, both questions
    assert sorted(json.dumps(r["id"]) for r in log_lines(log)) == sorted(['"a"', '"b"', "3"])
