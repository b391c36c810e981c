"""``jev calibrate`` on states with no label (the question's own traffic) on the embedded wire model: the lean over
the states divided out, written to one file that the client loads and that turns the same answers it reports."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jev_shared import SystemOneClient
from jev_shared.calibration import Calibrator
from jev_shared.cli import main

pytestmark = pytest.mark.live

DATA = Path(__file__).resolve().parent.parent / "bench" / "data" / "spam.jsonl"
SPAM = {"spam": {"type": "noul", "instructions": "This message is spam."}}


def spam_rows() -> list[dict]:
    return [json.loads(line) for line in DATA.read_text().splitlines()]


def write(tmp_path: Path, rows: list[dict]) -> tuple[Path, Path]:
    lines, questions = tmp_path / "states.jsonl", tmp_path / "q.json"
    lines.write_text("".join(json.dumps(r) + "\n" for r in rows))
    questions.write_text(json.dumps(SPAM))
    return lines, questions


def calibrate(local_server, lines: Path, questions: Path, out: Path) -> int:
    return main(["calibrate", str(lines), "--questions", str(questions), "--out", str(out),
                 "--backend-url", local_server.base_url, "--model", local_server.model])


def test_states_without_labels_fit_the_lean_and_the_file_loads_into_the_client(local_server, tmp_path, capsys):
    rows = spam_rows()
    lines, questions = write(tmp_path, [{"state": r["text"]} for r in rows])
    out = tmp_path / "cal.json"
    assert calibrate(local_server, lines, questions, out) == 0
    report = capsys.readouterr().out
    assert f"spam: {len(rows)} states; lean true " in report and "divided out" in report
    cal = Calibrator.load(out)
    assert set(cal.biases["spam"]) == {"true", "false"} and cal.temperature("spam") == 1.0
    # the lean divided out is the mean answer over these states: after it, they average one half
    sdk = local_server.client()
    try:
        raw = SystemOneClient(sdk, model=local_server.model, calibrator=None)
        fitted = SystemOneClient(sdk, model=local_server.model, calibrator=cal)
        before = [raw.system_one(r["text"], SPAM).answers["spam"].noul for r in rows]
        after = [fitted.system_one(r["text"], SPAM).answers["spam"].noul for r in rows]
    finally:
        sdk.close()
    mean_before = sum(before) / len(before)
    # the same mean read again: two passes over one server may differ in the third decimal (its slots batch
    # requests differently), so the two-decimal figure is compared, not matched as text
    reported = re.search(r"lean true (\d\.\d\d)", report)
    assert reported is not None and abs(float(reported.group(1)) - mean_before) <= 0.015, (report, mean_before)
    assert abs(sum(p > 0.5 for p in after) - len(after) / 2) < abs(sum(p > 0.5 for p in before) - len(before) / 2) \
        or abs(mean_before - 0.5) < 0.05


def test_labelled_states_add_a_temperature_and_a_held_out_report(local_server, tmp_path, capsys):
    rows = spam_rows()
    lines, questions = write(tmp_path, [{"state": r["text"], "label": r["label"]} for r in rows[:20]]
                             + [{"state": r["text"]} for r in rows[20:]])
    out = tmp_path / "cal.json"
    assert calibrate(local_server, lines, questions, out) == 0
    report = capsys.readouterr().out
    assert "20 labelled, each half judged by a fit on the other" in report
    for step in ("as answered", "lean divided", "labels only", "both"):  # each ECE beside a calibrated model's band
        assert re.search(rf"    {step} +\d+\.\d% / \d\.\d{{3}} \(\d\.\d{{3}}\) / \d\.\d{{3}}", report), report
    assert Calibrator.load(out).temperature("spam") != 1.0


def test_too_few_states_for_a_lean_is_refused_naming_how_many_more(local_server, tmp_path, capsys):
    lines, questions = write(tmp_path, [{"state": r["text"]} for r in spam_rows()[:5]])
    assert calibrate(local_server, lines, questions, tmp_path / "cal.json") == 2
    assert "needs at least 20 of its states (spam: 15 more)" in capsys.readouterr().err
    assert not (tmp_path / "cal.json").exists()


def test_jev_decide_applies_the_file_as_the_library_does(local_server, tmp_path, capsys):
    rows = spam_rows()
    lines, questions = write(tmp_path, [{"state": r["text"]} for r in rows])
    out = tmp_path / "cal.json"
    assert calibrate(local_server, lines, questions, out) == 0
    capsys.readouterr()
    state = rows[0]["text"]
    assert main(["decide", "--state", state, "--questions", str(questions), "--calibration", str(out),
                 "--backend-url", local_server.base_url, "--model", local_server.model]) == 0
    door = json.loads(capsys.readouterr().out)["answers"]["spam"]["noul"]
    sdk = local_server.client()
    try:
        library = SystemOneClient(sdk, model=local_server.model, calibrator=Calibrator.load(out))
        assert library.system_one(state, SPAM).answers["spam"].noul == pytest.approx(door, abs=1e-4)  # the server's float noise between slots
    finally:
        sdk.close()


def test_jev_decide_refuses_a_bad_file_and_a_labelled_run_with_a_file_before_any_request(tmp_path, capsys):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(SPAM))
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "jev-calibration/1",\n "temperatures": {"*": 1},\n "biases": {"spam": {"true": NaN}}}')
    dead = ["--backend-url", "http://127.0.0.1:9/v1", "--model", "m"]  # nothing listens: any request would fail
    assert main(["decide", "--state", "hi", "--questions", str(questions), "--calibration", str(bad), *dead]) == 2
    assert "bad.json" in capsys.readouterr().err
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": "1", "text": "hi", "label": true}\n')
    assert main(["decide", "--input", str(inp), "--column", "text", "--label", "label", "--questions", str(questions),
                 "--output", str(tmp_path / "out.jsonl"), "--calibration", str(bad), *dead]) == 2
    assert "--calibration with --label" in capsys.readouterr().err


def test_decide_keep_states_then_calibrate_closes_the_loop_with_no_label(local_server, tmp_path, capsys):
    rows = spam_rows()
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows))
    _, questions = write(tmp_path, [])
    log, cal = tmp_path / "log.jsonl", tmp_path / "cal.json"
    backend = ["--backend-url", local_server.base_url, "--model", local_server.model]
    assert main(["decide", "--input", str(inp), "--column", "text", "--questions", str(questions), "--output",
                 str(log), "--keep-states", "--no-progress", *backend]) == 0
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert {line["id"]: line["state"] for line in lines} == {r["id"]: r["text"] for r in rows}
    capsys.readouterr()
    assert main(["calibrate", str(log), "--questions", str(questions), "--out", str(cal), *backend]) == 0
    assert f"spam: {len(rows)} states; lean true " in capsys.readouterr().out
    assert set(Calibrator.load(cal).biases["spam"]) == {"true", "false"}
    plain = tmp_path / "plain.jsonl"
    assert main(["decide", "--input", str(inp), "--column", "text", "--questions", str(questions), "--output",
                 str(plain), "--no-progress", *backend]) == 0
    assert all("state" not in json.loads(line) for line in plain.read_text().splitlines())  # only when asked
