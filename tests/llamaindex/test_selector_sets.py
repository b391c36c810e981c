"""JevMultiSelector with decision sets: the selection is the answer's conformal set, most probable first."""

from __future__ import annotations

import pytest
from llama_index.core.tools.types import ToolMetadata

from jev_llamaindex import JevMultiSelector
from jev_shared import DecisionSets

from .conftest import TOOLS, FakeClient

META = [ToolMetadata(name=n, description=d) for n, d in TOOLS]
#: cars ~0.81, cats ~0.13, planes ~0.05.
WINDOW = {"A": -2.0, "B": -0.2, "C": -3.0}


def selector(**kw) -> JevMultiSelector:
    return JevMultiSelector.from_defaults(FakeClient(WINDOW), model="fake", labels="letters", **kw)


def test_the_selection_is_the_decision_set():
    sets = DecisionSets({"*": 0.1}, coverage=0.9, n=200)
    result = selector(sets=sets).select(META, "How fast is a Ferrari?")
    assert [s.index for s in result.selections] == [1, 0]  # cars, cats: both reach the set's 0.1
    assert "decision set at 90%" in result.selections[0].reason
    assert [s.index for s in selector().select(META, "q").selections] == [1]  # the 0.2 threshold alone


def test_an_empty_set_keeps_the_top_candidate_or_nothing():
    sets = DecisionSets({"*": 0.95}, coverage=0.9, n=200)
    result = selector(sets=sets).select(META, "q")
    assert [s.index for s in result.selections] == [1] and "empty" in (result.note or "")
    assert selector(sets=sets, allow_empty=True).select(META, "q").selections == []


def test_sets_need_a_choice_question():
    with pytest.raises(ValueError, match="question='choice'"):
        JevMultiSelector.from_defaults(FakeClient(WINDOW), model="fake", question="noul",
                                       sets=DecisionSets({"*": 0.1}, coverage=0.9, n=200))


def test_sets_fitted_on_other_candidates_are_refused_before_any_request():
    other = DecisionSets({"*": 0.1}, coverage=0.9, n=200, options=["boats", "trains"])
    client = FakeClient(WINDOW)
    with pytest.raises(ValueError, match="sets: fitted on the options"):
        JevMultiSelector.from_defaults(client, model="fake", labels="letters", sets=other).select(META, "q")
    assert client.calls == []  # nothing was sent
    keys = [n for n, _ in TOOLS]
    same = DecisionSets({"*": 0.1}, coverage=0.9, n=200, options=keys)
    assert [s.index for s in selector(sets=same).select(META, "q").selections] == [1, 0]
