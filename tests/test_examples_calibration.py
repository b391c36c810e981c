"""A question's own examples calibrate it: their held-out answers are labelled answers.

The provider is the real openai SDK over ``httpx.MockTransport``: a fake window that reads the last
user message (the state asked), so each example's held-out answer and the scored state's answer
are whatever the test says.
"""

from __future__ import annotations

import json
import math

import httpx
import openai
import pytest

from jev_shared import Choice, Example, Noul, Score, SystemOneClient
from jev_shared.calibration import Calibrator, Record, examples_calibrator, shipped
from jev_shared.calibration.fit import fit_temperature, fit_temperature_toward
from tests.helpers.replies import chat_tokens

MODEL = "qwen2.5-coder-0.5b"  # debias="auto" is on and a calibration is shipped: the defaults under test
TEAM = Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"})
#: Each example's state is answered confidently *wrong*: the model is over-confident on this question.
WRONG = [Example(state="EX-A refund my card", answer="billing"), Example(state="EX-B the app crashes", answer="technical")]
WINDOWS = {"EX-A": [("technical", -0.05), ("billing", -3.0)], "EX-B": [("billing", -0.05), ("technical", -3.0)]}
DEFAULT_WINDOW = [("billing", -0.1), ("technical", -2.5)]


def _reply(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    last = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    window = next((w for tag, w in WINDOWS.items() if tag in last), DEFAULT_WINDOW)
    if "spam" in json.dumps(body["messages"][0]):
        window = [("yes", -0.3), ("no", -1.4)]
    return httpx.Response(200, json=chat_tokens(window, usage=(10, 1)))


def client(**kw: object) -> SystemOneClient:
    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k",
                        http_client=httpx.Client(transport=httpx.MockTransport(_reply)))
    return SystemOneClient(sdk, model=MODEL, api="chat_completions", **kw)  # type: ignore[arg-type]


def test_examples_that_show_every_option_calibrate_their_question() -> None:
    """Examples answered confidently wrong soften the question's answer below the shipped fit's alone."""
    own = client().system_one("ticket", {"team": TEAM}, examples=WRONG)
    alone = client(calibrator=shipped(MODEL)).system_one("ticket", {"team": TEAM}, examples=WRONG)
    assert own.debug["calibration"] == {"team": "examples"}
    assert alone.debug["calibration"] == {"team": "custom"}
    assert own.answers["team"].choice == alone.answers["team"].choice == "billing"  # a temperature keeps the answer
    assert 0.5 < own.answers["team"].probabilities["billing"] < alone.answers["team"].probabilities["billing"]


def test_zero_shot_and_partial_examples_keep_the_shipped_calibration() -> None:
    c = client()
    assert c.system_one("ticket", {"team": TEAM}).debug["calibration"] == {"team": "shipped"}
    partial = [Example(state="EX-A refund", answer="billing")]  # leaves an option out: no labelled answers
    assert c.system_one("ticket", {"team": TEAM}, examples=partial).debug["calibration"] == {"team": "shipped"}
    mixed = c.system_one("ticket", {"team": TEAM, "spam": Noul(instructions="This is spam.")},
                         examples={"team": WRONG})
    assert mixed.debug["calibration"] == {"team": "examples", "spam": "shipped"}


def test_no_calibration_says_none_and_a_custom_one_is_left_alone() -> None:
    off = client(calibrator=None).system_one("ticket", {"team": TEAM}, examples=WRONG)
    assert "calibration" not in off.debug and "calibrated" not in off.debug
    mine = Calibrator({"*": 2.0})
    custom = client(calibrator=mine).system_one("ticket", {"team": TEAM}, examples=WRONG)
    assert custom.debug["calibration"] == {"team": "custom"}


def test_the_questions_own_fit_is_made_once_per_prompt() -> None:
    c = client()
    first = c.system_one("ticket", {"team": TEAM}, examples=WRONG)
    second = c.system_one("another ticket", {"team": TEAM}, examples=WRONG)
    assert len(c._own_calibrations) == 1  # noqa: SLF001
    assert second.usage.n_calls == 1 and first.usage.n_calls == 3  # the priors were paid once
    assert second.debug["calibration"] == {"team": "examples"}


def test_the_temperature_is_shrunk_toward_the_shipped_verdict() -> None:
    recs = [Record({"a": 0.9, "b": 0.1}, "b"), Record({"a": 0.8, "b": 0.2}, "a"), Record({"a": 0.95, "b": 0.05}, "a")]
    free = fit_temperature(recs)
    assert fit_temperature_toward(recs, 1.0, 0.0) == pytest.approx(free, rel=1e-4)
    shrunk = fit_temperature_toward(recs, 1.0, 10.0)
    assert 1.0 < shrunk < free
    assert fit_temperature_toward(recs, 1.0, 1e6) == pytest.approx(1.0, abs=1e-3)
    assert fit_temperature_toward([], 2.0) == 2.0
    cal = examples_calibrator(Calibrator(), "*choice+examples", ("a", "b"), [([0.9, 0.1], "b"), ([0.8, 0.2], "a")])
    assert cal.temperature() > 1.0 and math.isfinite(cal.temperature())


def test_debias_auto_is_set_per_kind_of_question() -> None:
    """Every kind divides by all of the prior on this model (zero-shot nouls too)."""
    from jev_shared.models import debias_strength

    assert debias_strength(MODEL, "noul", False) == debias_strength(MODEL, "choice", False) == 1.0
    assert debias_strength(MODEL, "noul", True) == 1.0
    assert debias_strength(MODEL, "choice", True) == debias_strength(MODEL, "score", False) == 1.0
    assert debias_strength("gpt-x", "choice", False) == 0.0
    resp = client(calibrator=None).system_one("ticket", {"spam": Noul(instructions="This is spam.")})
    p_yes = math.exp(-0.3) / (math.exp(-0.3) + math.exp(-1.4))  # every state reads the same window here
    assert resp.debug["priors"]["spam"]["yes"] == pytest.approx(p_yes)
    assert resp.answers["spam"].noul == pytest.approx(0.5)  # the state reads as the empty ones: no lean left


LARGE = "qwen2.5-coder-1.5b"
URGENCY = Score(instructions="How urgent?", criteria=["low", "medium", "high"])  # three levels: asked by name
#: Each example's state read with the others as its examples: the low and high ones misread toward "medium".
LEVEL_WINDOWS = {"EX-L": [("medium", -0.2), ("low", -1.8), ("high", -3.0)],
                 "EX-M": [("medium", -0.1), ("low", -2.5), ("high", -3.2)],
                 "EX-H": [("medium", -0.4), ("high", -1.2), ("low", -3.5)]}
LEVELS = [Example(state="EX-L can wait", answer="0"), Example(state="EX-M this week", answer="1"),
          Example(state="EX-H down now", answer="2")]


def _level_reply(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    last = [m["content"] for m in body["messages"] if m["role"] == "user"][-1]
    window = next((w for tag, w in LEVEL_WINDOWS.items() if tag in last), [("high", -0.3), ("medium", -1.5), ("low", -3.0)])
    return httpx.Response(200, json=chat_tokens(window, usage=(10, 1)))


def large_client(**kw: object) -> SystemOneClient:
    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k",
                        http_client=httpx.Client(transport=httpx.MockTransport(_level_reply)))
    return SystemOneClient(sdk, model=LARGE, api="chat_completions", calibrator=None, **kw)  # type: ignore[arg-type]


def test_the_large_models_scores_with_examples_divide_by_a_quarter_of_their_lean() -> None:
    """On the 1.5B a score whose examples show every level divides by the examples' own lean raised to 0.25
    (chosen leave-one-dataset-out on finphrasebank, sick and sst5: 146 right of 270 against half's 141)."""
    from jev_shared.models import debias_strength

    assert debias_strength(LARGE, "score", True) == 0.25
    assert debias_strength(LARGE, "choice", True) == debias_strength(LARGE, "noul", True) == 0.5  # unchanged
    whole = large_client(debias=True).system_one("ticket", {"u": URGENCY}, examples=LEVELS).debug["priors"]["u"]
    auto = large_client().system_one("ticket", {"u": URGENCY}, examples=LEVELS).debug["priors"]["u"]
    assert list(auto) == list(whole) and len(whole) == 3
    assert list(auto.values()) == pytest.approx([max(p, 1e-3) ** 0.25 for p in whole.values()])
    assert list(auto.values()) != pytest.approx([max(p, 1e-3) ** 0.5 for p in whole.values()])
