"""One calibration file, one question, two wires: ``/v1/systemone`` (the question keyed ``team``) and
``/v1/decisions`` (the question named ``team``) answer the same distribution and the same set, the file's
temperature for ``team`` applied on both (the Decisions wire had applied the sets by name but the
temperature of ``"*"``: a set of one where the System One wire abstained). Real HTTP on loopback, the real
gateway in front of a loopback backend."""

from __future__ import annotations

import json

import httpx
import pytest

from jev_shared.gateway.config import Backend, GatewayConfig
from jev_shared.gateway.sets import load_calibration
from tests.gateway.conftest import running
from tests.helpers.replies import chat_tokens
from tests.hostile.fast_stub import FastStub

pytestmark = pytest.mark.timeout(120)
OPTIONS = {"opt1": "the first", "opt2": "the second", "opt3": "the third"}
REPLY = chat_tokens({"opt1": -0.1, "opt2": -2.6, "opt3": -3.4})
SETS = {"format": "jev-decision-sets/1", "coverage": 0.9, "n": 200, "thresholds": {"*": 0.3},
        "options": list(OPTIONS)}


def _both(tmp_path, temperatures: dict) -> tuple[dict, dict]:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"format": "jev-calibration/1", "temperatures": temperatures,
                                "decision_sets": {"team": SETS}}))
    with FastStub(REPLY) as stub:
        config = GatewayConfig(backends={"m": Backend(stub.base_url, "m")}, method="logprobs", cache=False,
                               max_retries=0, calibration=load_calibration(path))
        with running(config) as url:
            one = httpx.post(url + "/v1/systemone", timeout=30, json={
                "model": "m", "state": "x", "questions": {"team": {
                    "type": "choice", "instructions": "Which one?", "criteria": OPTIONS}}})
            dec = httpx.post(url + "/v1/decisions", timeout=30, json={
                "model": "m", "input": "x", "questions": [{"type": "choice", "name": "team", "instructions": "Which one?",
                                                           "choices": [{"value": k, "description": d}
                                                                       for k, d in OPTIONS.items()]}]})
    assert one.status_code == 200 and dec.status_code == 200, (one.text, dec.text)
    return one.json()["answers"]["team"], dec.json()["answers"][0]


def test_a_question_named_in_the_file_gets_its_temperature_on_both_wires(tmp_path):
    one, dec = _both(tmp_path, {"*": 1.0, "team": 50.0})
    by_value = {p["value"]: p["probability"] for p in dec["probabilities"]}
    assert by_value == pytest.approx(one["probabilities"], abs=1e-9)
    assert max(by_value.values()) < 0.4  # T = 50: all but flat
    assert one["decision_set"] == dec["decision_set"] and len(dec["decision_set"]) == 3
    assert one["abstains"] is dec["abstains"] is True


def test_without_a_fit_of_its_name_both_wires_use_the_files_global_temperature(tmp_path):
    one, dec = _both(tmp_path, {"*": 1.0, "other": 50.0})
    by_value = {p["value"]: p["probability"] for p in dec["probabilities"]}
    assert by_value == pytest.approx(one["probabilities"], abs=1e-9)
    assert dec["decision_set"] == one["decision_set"] == ["opt1"] and dec["abstains"] is False
