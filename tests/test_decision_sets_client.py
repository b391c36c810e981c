"""A client's ``sets=`` attaches a question's set only where the sets were fitted on its options: sets it would
give a question with other options are refused at the door (InvalidQuestionError, before any request), as the
gateway's ``--calibration`` already leaves such an answer without a set (``DecisionSets.applies_to``)."""

from __future__ import annotations

import pytest

from jev_shared import Choice, ChoiceAnswer, DecisionSets, Noul, SystemOneClient
from jev_shared.decision_sets import attach_sets
from jev_shared.errors import InvalidQuestionError
from tests.helpers import provider, windows

TWO = Choice(instructions="Which?", criteria={"A": "a", "B": "b"})
THREE = Choice(instructions="Which?", criteria={"A": "a", "B": "b", "C": "c"})


def sets_on_a_b() -> DecisionSets:
    """Sets fitted on answers over the options A and B."""
    answers = [{"A": 0.9 - i / 100, "B": 0.1 + i / 100} for i in range(40)]
    return DecisionSets.fit(answers, ["A" if i % 5 else "B" for i in range(40)], 0.8)


def client(sets: DecisionSets | dict[str, DecisionSets]) -> SystemOneClient:
    backend = provider(windows({"A": -0.05, "B": -3.5, "C": -4.0}))
    return SystemOneClient(backend, model="m", calibrator=None, sets=sets)


@pytest.mark.parametrize("given", ["alone", "by id", "star"])
def test_sets_fitted_on_other_options_are_refused_before_any_request(given):
    sets = sets_on_a_b()
    chosen = {"alone": sets, "by id": {"q": sets}, "star": {"*": sets}}[given]
    sdk = provider(windows({"A": -0.05, "B": -3.5, "C": -4.0}))
    with pytest.raises(InvalidQuestionError) as refused:
        SystemOneClient(sdk, model="m", calibrator=None, sets=chosen).system_one("x", {"q": THREE})
    assert refused.value.question_id == "q" and refused.value.field == "sets"
    assert "'C'" in str(refused.value) and "sets={question_id: sets}" in str(refused.value)
    assert len(sdk.wire) == 0  # nothing was sent
    with pytest.raises(InvalidQuestionError):
        client(chosen).check({"q": THREE})


def test_sets_for_another_question_leave_this_one_alone():
    sets = sets_on_a_b()
    resp = client({"q": sets}).system_one("x", {"q": TWO, "other": THREE})
    assert resp.answers["q"].decision_set == ["A"] and resp.answers["other"].decision_set is None


def test_a_noul_question_is_refused_sets_fitted_on_a_choice():
    with pytest.raises(InvalidQuestionError, match="'true', 'false'"):
        client(sets_on_a_b()).system_one("x", {"ok": Noul(instructions="Fine?")})


def test_attach_sets_leaves_an_answer_of_other_options_without_a_set():
    sets = sets_on_a_b()
    fits = ChoiceAnswer(choice="A", probabilities={"A": 0.95, "B": 0.05}, confidence=0.9)
    other = ChoiceAnswer(choice="A", probabilities={"A": 0.9, "B": 0.05, "C": 0.05}, confidence=0.8)
    out = attach_sets({"q": fits, "r": other}, sets)
    assert out["q"].decision_set == ["A"] and out["r"].decision_set is None and out["r"].abstains is False


def test_sets_saved_without_their_options_apply_to_any_answer():
    sets = DecisionSets({"*": 0.5}, coverage=0.9, n=10)  # an old file: no options recorded
    resp = client(sets).system_one("x", {"q": THREE})
    assert resp.answers["q"].decision_set == ["A"]
