"""The selectors' pure parts on their own: the pick rules, the prompt variables, the shared checks (no client)."""

from __future__ import annotations

import pytest

from jev_llamaindex import JevMultiSelector, JevRelevanceFilter, JevSingleSelector
from jev_llamaindex.picks import multi_pick, single_pick
from jev_shared import SystemOneClient

from .conftest import FakeClient

KEYS = ["cats", "cars", "planes"]
PROBS = {"cats": 0.1, "cars": 0.6, "planes": 0.3}


def test_single_pick_falls_back_or_refuses_below_min_confidence():
    assert single_pick(KEYS, PROBS, "cars", 0.5, min_confidence=0.4, default_index=None).picked == [1]
    fallback = single_pick(KEYS, PROBS, "cars", 0.2, min_confidence=0.4, default_index=2)
    assert fallback.picked == [2] and fallback.refusal is None and "default_index" in (fallback.note or "")
    refused = single_pick(KEYS, PROBS, "cars", 0.2, min_confidence=0.4, default_index=None)
    assert refused.picked == [1] and refused.note == "below min_confidence" and "default_index=" in (refused.refusal or "")


def test_multi_pick_ranks_caps_and_keeps_the_top_one_unless_empty_is_allowed():
    pick = multi_pick(KEYS, PROBS, threshold=0.2, max_outputs=None, allow_empty=False, what="probability")
    assert pick.picked == [1, 2] and pick.note is None
    assert multi_pick(KEYS, PROBS, threshold=0.2, max_outputs=1, allow_empty=False, what="p").picked == [1]
    assert multi_pick(KEYS, PROBS, threshold=0.9, max_outputs=None, allow_empty=False, what="p").picked == [1]
    assert multi_pick(KEYS, PROBS, threshold=0.9, max_outputs=None, allow_empty=True, what="p").picked == []


def test_template_variables_come_from_the_class_and_the_question():
    assert JevSingleSelector.template_variables("choice") == {"query_str", "num_choices", "context_list"}
    assert JevMultiSelector.template_variables("choice") == {"query_str", "num_choices", "context_list", "max_outputs"}
    assert {"choice_name", "choice_description"} <= JevMultiSelector.template_variables("noul")


def test_one_threshold_rule_for_the_multi_selector_and_the_filter():
    engine = SystemOneClient(FakeClient({}), model="fake")
    for make in (lambda: JevMultiSelector(engine, threshold=1.5), lambda: JevRelevanceFilter(engine, threshold=1.5)):
        with pytest.raises(ValueError, match=r"threshold: must lie in \[0, 1\], got 1.5"):
            make()


def test_constructors_need_a_client():
    for make in (JevSingleSelector, JevMultiSelector, JevRelevanceFilter):
        with pytest.raises(ValueError, match="pass a client"):
            make()
