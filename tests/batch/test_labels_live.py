"""From a labelled file to a calibration on the embedded model: ``jev decide --label`` then ``jev calibrate`` on
its output as written, no join script (the SmolLM2 wire model: its answers are near chance, the loop is the point)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.batch_data import DATA, ROUTING
from jev_shared.calibration import Calibrator
from jev_shared.cli import main
from tests.batch.test_cli_batch import jev, log_lines, write_jsonl

pytestmark = pytest.mark.live

URGENCY = {"type": "score", "instructions": "How urgent is this ticket?",
           "criteria": ["can wait", "soon", "today", "right now"]}
SPAM = {"type": "noul", "instructions": "This message is spam."}


def rows(name: str, n: int) -> list[dict]:
    """The first ``n`` of the project's labelled tickets ``{"id", "text", "label"}`` (bench/data)."""
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()[:n]]


def decide(local_server, tmp_path: Path, inp: Path, questions: dict, *labels: str):
    qpath = tmp_path / "q.json"
    qpath.write_text(json.dumps(questions))
    out = tmp_path / "out.jsonl"
    label_flags = [arg for label in labels for arg in ("--label", label)]
    done = jev("decide", "--input", str(inp), "--column", "text", *label_flags, "--questions", str(qpath),
               "--output", str(out), "--backend-url", local_server.base_url, "--model", local_server.model,
               "--no-progress")
    assert done.returncode == 0, done.stderr
    return out


def test_decide_with_a_label_writes_lines_calibrate_reads_unchanged(local_server, tmp_path, capsys):
    data = rows("routing.jsonl", 16)
    out = decide(local_server, tmp_path, write_jsonl(tmp_path / "X.jsonl", data), ROUTING, "label")
    lines = log_lines(out)
    labels = {line["id"]: line["labels"] for line in lines}  # the log is in completion order
    assert labels == {r["id"]: {"team": r["label"]} for r in data}
    assert all(line["error"] is None and set(line["answers"]["team"]["probabilities"]) == set(ROUTING["team"]["criteria"])
               for line in lines)
    right = sum(line["answers"]["team"]["choice"] == line["labels"]["team"] for line in lines)
    cal = tmp_path / "cal.json"
    assert main(["calibrate", str(out), "--out", str(cal)]) == 0
    report = capsys.readouterr().out
    assert report.startswith("16 labelled answers") and f"accuracy        {right / 16:.1%} ->" in report
    assert Calibrator.load(cal).temperature("team") > 0


@pytest.mark.slow
def test_a_choice_a_score_and_a_noul_labelled_in_one_run(local_server, tmp_path, capsys):
    team, urgency, spam = rows("routing.jsonl", 8), rows("urgency.jsonl", 8), rows("spam.jsonl", 8)
    data = [{"id": t["id"], "text": t["text"], "team": t["label"], "urgency": str(u["label"]),
             "spam": "yes" if s["label"] else "no"} for t, u, s in zip(team, urgency, spam)]
    questions = {**ROUTING, "urgency": URGENCY, "spam": SPAM}
    out = decide(local_server, tmp_path, write_jsonl(tmp_path / "X.jsonl", data), questions,
                 "team=team", "urgency=urgency", "spam=spam")
    lines = {line["id"]: line for line in log_lines(out)}
    for row in data:
        assert lines[row["id"]]["labels"] == {"team": row["team"], "urgency": int(row["urgency"]),
                                              "spam": row["spam"] == "yes"}
    answered = sum(len(line["answers"] or {}) for line in lines.values())
    assert main(["calibrate", str(out), "--out", str(tmp_path / "cal.json")]) == 0
    assert capsys.readouterr().out.startswith(f"{answered} labelled answers")
