"""Answers: the golden vectors of shared/DESIGN.md, confidence, and the System One answer shape."""

from __future__ import annotations

import math

import pytest

from jev_shared import Choice, Noul, Score
from jev_shared.answers import build_answer, entropy_confidence, peak_confidence
from jev_shared.questions import prepare_question
from jev_shared.readout import read_labels
from tests.helpers.replies import chat_logprobs as window

TEAM = Choice(instructions="team", criteria={"billing": "", "technical": "", "sales": ""})


def test_golden_vector_from_methods_txt():
    prep = prepare_question("team", TEAM, "logprobs")
    ro = read_labels(window([("A", -0.12), ("B", -2.47), ("C", -3.48)]), prep.labels)
    answer = build_answer(prep, ro.probs)
    assert answer.choice == "billing"
    assert answer.probabilities["billing"] == pytest.approx(0.884873983, abs=1e-9)
    assert answer.probabilities["technical"] == pytest.approx(0.084389690, abs=1e-9)
    assert answer.probabilities["sales"] == pytest.approx(0.030736327, abs=1e-9)
    assert answer.confidence == pytest.approx(0.827310974, abs=1e-9)


def test_confidence_formulas():
    assert peak_confidence([0.5, 0.5]) == 0.0
    assert peak_confidence([1.0, 0.0]) == 1.0
    assert entropy_confidence([0.5, 0.5]) == pytest.approx(0.0)
    assert entropy_confidence([1.0, 0.0]) == 1.0
    # under-the-hood.txt says "about 0.56"; the formula gives 0.531 (DESIGN.md: the formula is right)
    assert entropy_confidence([0.9, 0.1]) == pytest.approx(0.531, abs=1e-3)
    assert peak_confidence([0.9, 0.1]) == pytest.approx(0.8)
    assert peak_confidence([1.0]) == entropy_confidence([1.0]) == 1.0


def test_entropy_confidence_is_selectable():
    prep = prepare_question("team", TEAM, "logprobs")
    assert build_answer(prep, [0.9, 0.1, 0.0], "entropy").confidence == pytest.approx(
        1 - (-(0.9 * math.log(0.9) + 0.1 * math.log(0.1)) / math.log(3)))


def test_ties_go_to_the_first_option():
    prep = prepare_question("team", TEAM, "logprobs")
    assert build_answer(prep, [1 / 3] * 3).choice == "billing"
    assert build_answer(prep, [0.2, 0.4, 0.4]).choice == "technical"


def test_score_is_the_expected_level_and_dumps_with_string_keys():
    prep = prepare_question("u", Score(instructions="urgency", criteria=["low", "mid", "high"]), "logprobs")
    answer = build_answer(prep, [0.2, 0.3, 0.5])
    assert answer.score == pytest.approx(0 * 0.2 + 1 * 0.3 + 2 * 0.5)
    dumped = answer.model_dump()
    assert dumped["legend"] == {"0": "low", "1": "mid", "2": "high"}
    assert list(dumped["probabilities"]) == ["0", "1", "2"]
    assert "confidence" in dumped


def test_noul_dumps_without_confidence():
    prep = prepare_question("s", Noul(instructions="spam"), "logprobs")
    answer = build_answer(prep, [0.8, 0.2])
    assert answer.model_dump() == {"type": "noul", "noul": pytest.approx(0.8)}
    assert answer.value is True


def test_typed_views_split_the_answers_by_kind_and_leave_the_dump_alone():
    from jev_shared import SystemOneResponse
    from jev_shared.answers import ChoiceAnswer, NoulAnswer, ScoreAnswer

    answers = {
        "team": build_answer(prepare_question("team", TEAM, "logprobs"), [0.7, 0.2, 0.1]),
        "urgency": build_answer(prepare_question("urgency", Score(instructions="u", criteria=["a", "b"]), "logprobs"),
                                [0.4, 0.6]),
        "spam": build_answer(prepare_question("spam", Noul(instructions="spam"), "logprobs"), [0.1, 0.9]),
    }
    resp = SystemOneResponse(model="m", answers=answers)
    assert resp.choices["team"].choice == "billing" and isinstance(resp.choices["team"], ChoiceAnswer)
    assert resp.scores["urgency"].score == pytest.approx(0.6) and isinstance(resp.scores["urgency"], ScoreAnswer)
    assert resp.nouls["spam"].noul == pytest.approx(0.1) and isinstance(resp.nouls["spam"], NoulAnswer)
    assert list(resp.choices) == ["team"] and list(resp.scores) == ["urgency"] and list(resp.nouls) == ["spam"]
    dumped = resp.model_dump()
    assert set(dumped) == {"model", "answers", "usage", "debug"}
    assert SystemOneResponse.model_validate(dumped) == resp
