"""A calibration fitted on top of another (``base``): the model's shipped calibration applied first, by the answer's
kind, then the question's own temperature; kept whole in one file, checked whole when loaded, and what
``jev calibrate`` writes for labelled states answered by a model that ships a calibration."""

from __future__ import annotations

import json
import math
import re

import pytest

from jev_shared import NoulAnswer, SystemOneClient
from jev_shared.calibration import GLOBAL, Calibrator, Context, Record, shipped
from jev_shared.calibration.fit import temper
from jev_shared.cli import main

pytestmark = pytest.mark.timeout(120)

MODEL = "qwen2.5-coder-1.5b"  # the embedded default: it ships a calibration


def _base() -> Calibrator:
    return Calibrator({GLOBAL: 1.0, "*noul": 2.0, "*choice+examples": 0.5})


def _noul(p: float, label: bool) -> Record:
    return Record({"true": p, "false": 1 - p}, "true" if label else "false", "spam", Context(kind="noul"))


def test_the_base_is_applied_first_by_the_answer_kind_then_the_own_temperature():
    records = [_noul(0.9, i % 4 != 0) for i in range(40)]  # 75% right at a stated 0.9: over-confident
    cal = Calibrator.fit(records, min_records=10, base=_base())
    own = cal.temperature("spam")
    based = temper([0.9, 0.1], 2.0)  # the base's *noul temperature
    assert cal.calibrate([records[0]])[0].probabilities["true"] == pytest.approx(temper(based, own)[0])
    # the own temperature was fitted on the base's answers: the base's T=2 already softens 0.9 to 0.75
    assert own == pytest.approx(1.0, abs=0.05)
    # a choice asked with examples takes the base's own fit for that kind
    choice = Record({"a": 0.6, "b": 0.4}, "a", "team", Context(kind="choice", examples=2))
    assert cal.calibrate([choice])[0].probabilities["a"] == pytest.approx(
        temper(temper([0.6, 0.4], 0.5), cal.temperature("team"))[0])


def test_a_file_with_a_base_loads_to_the_same_answers(tmp_path):
    cal = Calibrator.fit([_noul(0.8, i % 3 != 0) for i in range(30)], min_records=10, base=_base())
    path = tmp_path / "cal.json"
    cal.save(path)
    assert json.loads(path.read_text())["base"]["temperatures"]["*noul"] == 2.0
    loaded = Calibrator.load(path)
    answer = NoulAnswer(noul=0.8, confidence=0.6)
    key = loaded.key_for("spam", "noul")
    assert loaded.apply(answer, key, Context(kind="noul")).noul == pytest.approx(
        cal.apply(answer, key, Context(kind="noul")).noul)


@pytest.mark.parametrize(("base", "where"), [
    ({"format": "jev-calibration/1", "temperatures": {"*noul": float("nan")}}, "base.temperatures.*noul"),
    ({"format": "jev-calibration/1", "temperatures": {"*": 1.0}, "base": {"format": "jev-calibration/1"}},
     "base.base"),
    ("shipped", "base"),
])
def test_a_bad_base_is_refused_with_where_it_is(tmp_path, base, where):
    path = tmp_path / "cal.json"
    path.write_text(json.dumps({"format": "jev-calibration/1", "temperatures": {"*": 1.0}, "base": base}, indent=2))
    with pytest.raises(ValueError, match=rf"cal\.json:\d+: {where.replace('*', '[*]')}"):
        Calibrator.load(path)


def _stub_reply():
    from tests.helpers.replies import chat, window

    return chat("Yes", {"content": window({"Yes": -0.3, "No": -1.35})}, "length")


def test_jev_calibrate_fits_labelled_states_on_top_of_the_shipped_calibration(tmp_path, capsys):
    """The states are answered raw over the wire; the file holds the model's shipped calibration as its base, and a
    client loading it answers as the shipped calibration then the fitted temperature."""
    from tests.hostile.fast_stub import FastStub

    states = tmp_path / "states.jsonl"
    states.write_text("".join(json.dumps({"state": f"message {i}", "label": i % 2 == 0}) + "\n" for i in range(24)))
    questions = json.dumps({"spam": {"type": "noul", "instructions": "This message is spam."}})
    out = tmp_path / "cal.json"
    with FastStub(_stub_reply()) as stub:
        assert main(["calibrate", str(states), "--questions", questions, "--backend-url", stub.base_url,
                     "--model", MODEL, "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        assert "fitted on top of the calibration shipped for the model" in printed
        ship = shipped(MODEL)
        assert ship is not None
        saved = json.loads(out.read_text())
        assert saved["base"]["maps"] == ship.to_dict()["maps"]
        cal = Calibrator.load(out)
        sdk = __import__("openai").OpenAI(base_url=stub.base_url, api_key="x")
        raw = SystemOneClient(sdk, model=MODEL, calibrator=None).system_one("hello", json.loads(questions))
        mine = SystemOneClient(sdk, model=MODEL, calibrator=cal).system_one("hello", json.loads(questions))
    p = raw.answers["spam"].noul
    expected = ship._temper({"true": p, "false": 1 - p}, ship.key_for("spam", "noul"), Context(kind="noul"))
    expected = temper([expected["true"], expected["false"]], cal.temperature("spam"))
    assert mine.answers["spam"].noul == pytest.approx(expected[0])
    # every labelled state got the same answer at half right: the own fit softens it toward one half
    assert math.isfinite(cal.temperature("spam")) and cal.temperature("spam") > 1.0


def test_recorded_answers_are_fitted_as_they_are(tmp_path, capsys):
    lines = tmp_path / "recorded.jsonl"
    lines.write_text("".join(json.dumps({"probabilities": {"true": 0.7, "false": 0.3}, "label": i % 2 == 0,
                                         "question_id": "spam"}) + "\n" for i in range(20)))
    out = tmp_path / "cal.json"
    assert main(["calibrate", str(lines), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "fitted on top" not in printed
    # the held-out ECE is judged beside what a perfectly calibrated model reads on as many answers
    assert re.search(r"ECE \(held out\)  \d\.\d{3} -> \d\.\d{3} \((inside|outside) the band of a perfectly calibrated "
                     r"model stating these probabilities: up to \d\.\d{3}, 9 times in 10, on 20 answers\)", printed), printed
    assert "base" not in json.loads(out.read_text())


def _decide_labelled(stub_url: str, tmp_path, n: int = 24, *extra: str) -> list[dict]:
    """``jev decide --label`` over the wire on ``n`` labelled messages; the log's lines."""
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "text": f"message {i}", "spam": i % 2 == 0}) + "\n" for i in range(n)))
    qpath = tmp_path / "q.json"
    qpath.write_text(json.dumps({"spam": {"type": "noul", "instructions": "This message is spam."}}))
    out = tmp_path / "answers.jsonl"
    assert main(["decide", "--input", str(inp), "--column", "text", "--label", "spam", "--questions", str(qpath),
                 "--output", str(out), "--backend-url", stub_url, "--model", MODEL, "--no-progress", *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_a_labelled_decide_log_names_the_shipped_calibration_and_calibrate_fits_on_top(tmp_path, capsys):
    """jev decide --label answers through the model's shipped calibration and says so on each line; jev calibrate
    on that log keeps the shipped calibration as the file's base, its own temperature fitted on the answers as
    logged, so a client loading the file answers as the log did, then the own temperature."""
    from tests.hostile.fast_stub import FastStub

    with FastStub(_stub_reply()) as stub:
        lines = _decide_labelled(stub.base_url, tmp_path)
        sdk = __import__("openai").OpenAI(base_url=stub.base_url, api_key="x")
        question = {"spam": {"type": "noul", "instructions": "This message is spam."}}
        as_shipped = SystemOneClient(sdk, model=MODEL).system_one("hello", question).answers["spam"].noul
        out = tmp_path / "cal.json"
        assert main(["calibrate", str(tmp_path / "answers.jsonl"), "--out", str(out)]) == 0
        printed = capsys.readouterr().out
        cal = Calibrator.load(out)
        mine = SystemOneClient(sdk, model=MODEL, calibrator=cal).system_one("hello", question)
    assert {line["shipped_calibration"] for line in lines} == {MODEL}
    assert [line["answers"]["spam"]["noul"] for line in lines] == [pytest.approx(as_shipped)] * len(lines)
    assert "fitted on top of the calibration shipped for the model" in printed
    ship = shipped(MODEL)
    assert ship is not None and json.loads(out.read_text())["base"]["maps"] == ship.to_dict()["maps"]
    assert mine.answers["spam"].noul == pytest.approx(temper([as_shipped, 1 - as_shipped], cal.temperature("spam"))[0])
    assert mine.debug is not None and mine.debug["calibration"] == {"spam": "custom on shipped"}


def test_a_file_on_the_shipped_calibration_applies_it_as_shipped_examples_included():
    """A question with examples is calibrated as shipped by its examples' own fit too; a file on top of the shipped
    calibration (its own temperature 1) answers exactly as the shipped calibration does, that step included."""
    from tests.helpers.replies import chat, window
    from tests.hostile.fast_stub import FastStub

    ship = shipped(MODEL)
    assert ship is not None
    team = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "money", "technical": "bugs"},
            "examples": [{"state": "refund me", "answer": "billing"}, {"state": "it crashes", "answer": "technical"}]}
    reply = chat("billing", {"content": window({"billing": -0.4, "technical": -1.1})}, "length")
    with FastStub(reply) as stub:
        sdk = __import__("openai").OpenAI(base_url=stub.base_url, api_key="x")
        auto = SystemOneClient(sdk, model=MODEL).system_one("charged twice", {"team": team})
        on = SystemOneClient(sdk, model=MODEL, calibrator=Calibrator().on(ship)).system_one("charged twice",
                                                                                            {"team": team})
    assert auto.debug is not None and auto.debug["calibration"] == {"team": "examples"}
    assert on.debug is not None and on.debug["calibration"] == {"team": "custom on examples"}
    assert on.answers["team"].probabilities == pytest.approx(auto.answers["team"].probabilities)


@pytest.mark.parametrize(("names", "says"), [
    ([MODEL, "qwen2.5-coder-0.5b"], "lines answered through different calibrations"),
    (["no-such-model"] * 2, "which this install does not ship"),
])
def test_a_decide_log_whose_calibration_cannot_be_the_base_is_refused(tmp_path, capsys, names, says):
    log = tmp_path / "answers.jsonl"
    answer = {"type": "noul", "noul": 0.7, "confidence": 0.4}
    log.write_text("".join(json.dumps({"id": i, "answers": {"spam": answer}, "error": None, "usage": None,
                                       "labels": {"spam": i % 2 == 0}, "shipped_calibration": name}) + "\n"
                           for i, name in enumerate(names * 5)))
    assert main(["calibrate", str(log), "--out", str(tmp_path / "cal.json")]) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "cal.json").exists()


@pytest.mark.parametrize("keep_states", [True, False])
def test_the_traffic_fit_asks_a_calibrated_decide_log_again_or_says_why_not(tmp_path, capsys, keep_states):
    """The lean is the model's own: a labelled log answered through the shipped calibration is asked again from its
    kept states, raw; without them the traffic fit is refused, naming the line, before any request."""
    from tests.hostile.fast_stub import FastStub

    q = tmp_path / "q.json"
    with FastStub(_stub_reply()) as stub:
        _decide_labelled(stub.base_url, tmp_path, 24, *(["--keep-states"] if keep_states else []))
        decided = stub.n_requests
        code = main(["calibrate", str(tmp_path / "answers.jsonl"), "--traffic", "--questions", str(q),
                     "--backend-url", stub.base_url, "--model", MODEL, "--out", str(tmp_path / "cal.json")])
        asked_again = stub.n_requests - decided
    err = capsys.readouterr().err
    if keep_states:
        assert code == 0 and asked_again >= 24  # each kept state, and the new client's first probes
        assert "base" not in json.loads((tmp_path / "cal.json").read_text())  # a fit on the raw answers, alone
    else:
        assert code == 2 and asked_again == 0
        assert "answers.jsonl:1: this jev decide --label line's answers went through the calibration shipped" in err
