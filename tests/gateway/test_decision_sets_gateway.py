"""The gateway returns the decision set in its answer when the model has one (``jev serve --calibration``).

Over real HTTP on loopback (uvicorn in a thread, and ``jev serve`` as a child process) in front of the
stub backend: with a calibration file holding decision sets, an answer they apply to carries
``decision_set`` and ``abstains`` in the wire JSON (System One and Decisions wires), computed from the
answer as sent; without the file, or for a question the file has no sets for, the fields are absent.
A file that is not a calibration is refused at start: one line, exit 2.
"""

from __future__ import annotations

import json

import httpx
import pytest

from jev_shared import DecisionSets
from jev_shared.calibration import Calibrator
from jev_shared.gateway.sets import load_calibration
from tests.gateway.conftest import KEY, MODEL, config_for, running
from tests.gateway.test_cli import start_serve
from tests.helpers.cli import jev, one_line_exit_2

pytestmark = pytest.mark.timeout(120)

AUTH = {"authorization": f"Bearer {KEY}"}
TEAM = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "payments", "technical": "bugs"}}
SPAM = {"type": "noul", "instructions": "This is spam."}
URGENCY = {"type": "score", "instructions": "How urgent?", "criteria": ["later", "today", "now"]}
QUESTIONS = {"team": TEAM, "spam": SPAM, "urgency": URGENCY}
STATE = "the app crashes want=technical truth=yes"


def write_calibration(path, temperature: float = 1.0) -> None:
    """A calibration (one temperature) and decision sets for ``team`` and ``spam``, none for ``urgency``."""
    Calibrator({"*": temperature}).save(path)
    DecisionSets.save_many({
        "team": DecisionSets({"*": 0.5}, coverage=0.9, n=200, options=["billing", "technical"]),
        "spam": DecisionSets({"*": 0.001}, coverage=0.95, n=200, options=["true", "false"]),
    }, path)


@pytest.fixture
def calibration_file(tmp_path):
    path = tmp_path / "calibration.json"
    write_calibration(path)
    return path


def ask(url: str, questions=QUESTIONS) -> dict:
    resp = httpx.post(url + "/v1/systemone", headers=AUTH, timeout=30,
                      json={"model": MODEL, "state": STATE, "questions": questions})
    assert resp.status_code == 200, resp.text
    return resp.json()["answers"]


def test_the_answer_carries_its_set_on_the_wire(stub, calibration_file):
    cal = load_calibration(calibration_file)
    with running(config_for(stub, calibration=cal)) as url:
        answers = ask(url)
    team, spam = answers["team"], answers["spam"]
    assert team["decision_set"] == ["technical"] and team["abstains"] is False
    assert spam["decision_set"] == ["true", "false"] and spam["abstains"] is True  # sure, but the sets ask for 99.9%
    # the set is the one the file's sets give the answer as sent
    assert team["decision_set"] == cal.sets["team"].of(team["probabilities"])
    assert spam["decision_set"] == cal.sets["spam"].of(spam["noul"])
    assert "decision_set" not in answers["urgency"] and "abstains" not in answers["urgency"]  # no sets for it


def test_without_the_file_the_wire_is_unchanged(stub, gateway_url):
    answers = ask(gateway_url)
    for answer in answers.values():
        assert "decision_set" not in answer and "abstains" not in answer


@pytest.mark.slow
def test_sets_for_other_options_are_not_attached(stub, tmp_path):
    path = tmp_path / "calibration.json"
    Calibrator({"*": 1.0}).save(path)
    DecisionSets({"*": 0.3}, coverage=0.9, n=100, options=["a", "b", "c"]).save(path)  # "*": every question
    with running(config_for(stub, calibration=load_calibration(path))) as url:
        answers = ask(url)
    assert all("decision_set" not in a for a in answers.values())  # none has the options a, b, c


@pytest.mark.slow
def test_the_calibration_in_the_file_is_applied(stub, tmp_path):
    path = tmp_path / "calibration.json"
    write_calibration(path, temperature=4.0)
    with running(config_for(stub, calibration=load_calibration(path))) as url:
        hot = ask(url, {"spam": SPAM})["spam"]
    with running(config_for(stub)) as url:
        plain = ask(url, {"spam": SPAM})["spam"]
    assert 0.5 < hot["noul"] < plain["noul"]  # a temperature of 4 pulls the answer toward 0.5
    assert hot["decision_set"] == DecisionSets.load(path, "spam").of(hot["noul"])


@pytest.mark.slow
def test_the_decisions_wire_carries_typed_sets(stub, calibration_file):
    questions = [{"type": "choice", "name": "team", "instructions": "Which team?",
                  "choices": [{"value": "billing"}, {"value": "technical"}]},
                 {"type": "predicate", "name": "spam", "instructions": "This is spam."},
                 {"type": "score", "name": "urgency", "instructions": "How urgent?",
                  "levels": [{"label": "later"}, {"label": "now"}]}]
    with running(config_for(stub, calibration=load_calibration(calibration_file))) as url:
        resp = httpx.post(url + "/v1/decisions", headers=AUTH, timeout=30,
                          json={"model": MODEL, "input": STATE, "questions": questions})
    assert resp.status_code == 200, resp.text
    team, spam, urgency = resp.json()["answers"]
    assert team["decision_set"] == ["technical"] and team["abstains"] is False
    assert spam["decision_set"] == [True, False] and spam["abstains"] is True
    assert "decision_set" not in urgency


@pytest.mark.slow
def test_the_openapi_document_shows_the_fields(stub, calibration_file):
    with running(config_for(stub, calibration=load_calibration(calibration_file))) as url:
        spec = httpx.get(url + "/openapi.json").json()
    schemas = spec["components"]["schemas"]
    for name in ("ChoiceAnswer", "ScoreAnswer", "NoulAnswer", "PredicateAnswer", "ChoiceAnswerOut", "ScoreAnswerOut"):
        props = schemas[name]["properties"]
        assert {"decision_set", "abstains"} <= set(props) and "--calibration" in props["decision_set"]["description"]
        assert "decision_set" not in schemas[name].get("required", [])


@pytest.mark.slow
def test_jev_serve_calibration_end_to_end(stub, calibration_file):
    proc, url = start_serve("--backend-url", stub.base_url, "--model", MODEL, "--calibration", str(calibration_file))
    try:
        answers = ask(url)
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert answers["team"]["decision_set"] == ["technical"] and answers["spam"]["abstains"] is True


BAD = {
    "not JSON": "{calibration",
    "a list": "[1, 2]",
    "neither": json.dumps({"hello": 1}),
    "a threshold above 1": json.dumps({"decision_sets": {"format": "jev-decision-sets/1", "coverage": 0.9, "n": 10,
                                                         "thresholds": {"*": 1.5}}}),
    "a coverage of 1": json.dumps({"decision_sets": {"format": "jev-decision-sets/1", "coverage": 1, "n": 10,
                                                     "thresholds": {"*": 0.5}}}),
    "sets without thresholds": json.dumps({"decision_sets": {"format": "jev-decision-sets/1", "coverage": 0.9}}),
    "a negative temperature": json.dumps({"format": "jev-calibration/1", "temperatures": {"*": -1}}),
    "a calibration of another format": json.dumps({"format": "jev-calibration/99", "temperatures": {"*": 1}}),
}


@pytest.mark.slow
@pytest.mark.parametrize("what", sorted(BAD))
def test_a_bad_file_is_refused_at_start(what, tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(BAD[what])
    one_line_exit_2(jev("serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", "m", "--calibration", str(path),
                        env={"JEV_API_KEYS": KEY}), "--calibration")


def test_a_calibration_without_sets_applies_the_calibration_only(tmp_path):
    path = tmp_path / "calibration.json"
    Calibrator({"*": 2.0}).save(path)
    cal = load_calibration(path)
    assert cal.calibrator is not None and cal.calibrator.temperature() == 2.0 and not cal.sets
    sets_only = tmp_path / "sets.json"
    DecisionSets({"*": 0.5}, coverage=0.9, n=50).save(sets_only)
    cal = load_calibration(sets_only)
    assert cal.calibrator is None and set(cal.sets) == {"*"}
