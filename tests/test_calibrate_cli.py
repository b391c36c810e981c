"""`jev calibrate` and the engine-level `calibrator=`: what a user gets from labelled answers."""

from __future__ import annotations

import json
import math

import pytest

from jev_shared import Choice, SystemOneClient
from jev_shared.calibration import Calibrator, Record, shipped
from jev_shared.cli import main
from tests.helpers import provider, windows

TEAM = Choice(instructions="Which team?", criteria={"billing": "", "technical": "", "sales": ""})


def overconfident(n: int = 60) -> list[dict]:
    """Answers that say 0.95 and are right 60% of the time: a temperature above 1 fixes them."""
    rows = []
    for i in range(n):
        label = ["billing", "technical", "sales"][i % 3]
        top = label if i % 5 < 3 else ["billing", "technical", "sales"][(i + 1) % 3]
        probs = {k: (0.95 if k == top else 0.025) for k in ("billing", "technical", "sales")}
        rows.append({"probabilities": probs, "label": label, "question_id": "team"})
    return rows


@pytest.mark.slow
def test_jev_calibrate_prints_ece_before_and_after_and_a_threshold(tmp_path, capsys):
    path = tmp_path / "labelled.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in overconfident()) + "\n")
    out = tmp_path / "cal.json"
    assert main(["calibrate", str(path), "--out", str(out), "--target", "0.5"]) == 0
    text = capsys.readouterr().out
    ece = [line for line in text.splitlines() if line.startswith("ECE (held out)")][0]
    before, after = (float(x) for x in ece.split()[3:6:2])
    assert after < before and before > 0.3
    assert "threshold" in text and "precision" in text
    cal = Calibrator.load(out)
    assert cal.temperature("team") > 1.0  # it softens the over-confident answers


def test_jev_calibrate_refuses_too_few_lines(tmp_path, capsys):
    path = tmp_path / "labelled.jsonl"
    path.write_text(json.dumps(overconfident(2)[0]) + "\n")
    assert main(["calibrate", str(path), "--out", str(tmp_path / "c.json")]) == 2
    assert "at least 4" in capsys.readouterr().err


def Window():  # noqa: N802 - read as the double it is
    """The real openai client answering billing far ahead of sales, every time."""
    return provider(windows([("billing", -0.05), ("sales", -3.0)], usage=(5, 1)))


def test_a_calibrator_on_the_client_reaches_every_answer():
    cal = Calibrator({"*": 1.0, "*choice": 3.0})  # by kind, as a shipped calibration holds it
    raw = SystemOneClient(Window(), model="m", calibrator=None).system_one("x", {"team": TEAM})
    calibrated = SystemOneClient(Window(), model="m", calibrator=cal).system_one("x", {"team": TEAM})
    p, q = raw.answers["team"].probabilities, calibrated.answers["team"].probabilities
    assert calibrated.answers["team"].choice == raw.answers["team"].choice == "billing"
    assert math.isclose(q["billing"] / q["sales"], (p["billing"] / p["sales"]) ** (1 / 3), rel_tol=1e-6)
    assert calibrated.debug["calibrated"] is True and "calibrated" not in raw.debug


def test_the_embedded_default_model_has_a_shipped_calibration_applied_by_default():
    cal = shipped("qwen2.5-coder-0.5b")
    # a temperature that depends on the answer's spread, for every kind: fitted on nine public sets, the
    # form best held out (each set judged by a fit that never saw it; docs/quality.md)
    assert cal is not None and set(cal.temperatures) == {"*"} and not cal.tops and cal.temperature() == 1.0
    fmap = cal.maps["*"]
    assert fmap.form == "temperature" and set(fmap.slope) == {"1", "entropy"}
    assert fmap.slope["1"] < 0 < fmap.slope["entropy"]  # bold answers softened, spread ones sharpened
    assert cal.key_for("team", "choice", examples=True) == "*" and cal.threshold("*") is not None
    client = SystemOneClient(Window(), model="qwen2.5-coder-0.5b")
    assert client.calibrator is not None and client.calibrator.temperatures == cal.temperatures
    assert SystemOneClient(Window(), model="gpt-x").calibrator is None  # nothing shipped: nothing applied
    with pytest.raises(ValueError, match="calibrator"):
        SystemOneClient(Window(), model="m", calibrator="yes")


def test_records_keep_a_kind_fit_apart_from_a_question_fit():
    cal = Calibrator({"*": 1.0, "*choice": 2.0, "team": 0.5})
    assert cal.key_for("team", "choice") == "team" and cal.key_for("other", "choice") == "*choice"
    assert cal.key_for("other", "noul") == "*"
    assert Record({"a": 0.5, "b": 0.5}, "a", "q").label == "a"


def test_a_question_with_examples_takes_the_examples_fit():
    from jev_shared import Example

    cal = Calibrator({"*": 1.0, "*choice": 1.0, "*choice+examples": 0.5})
    shots = [Example(state="refund me", answer="billing")]
    zero = SystemOneClient(Window(), model="m", calibrator=cal).system_one("x", {"team": TEAM})
    few = SystemOneClient(Window(), model="m", calibrator=cal).system_one("x", {"team": TEAM}, examples=shots)
    assert few.answers["team"].probabilities["billing"] > zero.answers["team"].probabilities["billing"]
