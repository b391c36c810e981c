"""Aliases for names that collide, and the continuation read's arithmetic (pure functions)."""

from __future__ import annotations

import math

import pytest

from jev_shared.labels import aliases_for, names_collide
from jev_shared.readon import chain, conditional, matches


@pytest.mark.parametrize("names, aliases", [
    (["order_status", "order_cancel", "refund"], ("status", "cancel", "refund")),
    (["sql_docs", "sql_api"], ("docs", "api")),
    (["choice_1", "choice_2", "choice_3"], ("1", "2", "3")),
    (["orderStatus", "orderCancel"], ("Status", "Cancel")),
    (["order", "order_status"], ("order", "status")),
    (["billing", "technical"], ("billing", "technical")),  # distinct already: unchanged
    (["team_hr", "team_it", "dept_finance", "dept_travel"], ("hr", "it", "finance", "travel")),
])
def test_aliases_keep_what_differs(names, aliases):
    assert aliases_for(names) == aliases
    assert not names_collide(list(aliases)) or aliases == tuple(names)


def test_aliases_that_would_not_be_unique_keep_the_names():
    assert aliases_for(["a_x", "b_x", "a_x_y"]) == ("x", "b_x", "y")
    names = ["sales_eu", "support_eu", "sales_us", "support_us"]
    assert len(set(aliases_for(names))) == 4


def test_a_continuation_token_counts_for_the_names_it_spells():
    group = ["1", "10", "11"]
    assert matches("1", "0", group) == ["10"]
    assert matches("1", "<|im_end|>", group) == ["1"] and matches("1", ".", group) == ["1"]
    assert matches("bill", "ing", ["billing", "bills"]) == ["billing"]
    assert matches("order", "_c", ["order_cancel", "order_card"]) == ["order_cancel", "order_card"]


def test_the_chain_is_a_distribution_over_the_group():
    cond = conditional("bill", ["billing", "bills"], [("ing", math.log(0.6)), ("s", math.log(0.3)), ("x", -1.0)])
    assert sum(cond.values()) == pytest.approx(1.0)
    assert cond["billing"] / cond["bills"] == pytest.approx(2.0)  # the junk token is not counted
    lps = chain(math.log(0.8), cond, {"sales": math.log(0.1)})
    assert math.exp(lps["billing"]) == pytest.approx(0.8 * 2 / 3)
    assert lps["sales"] == math.log(0.1)


def test_numbered_names_answer_by_their_descriptions():
    names = ["choice_1", "choice_2", "choice_3"]
    assert aliases_for(names, ["charges and refunds", "bugs and crashes", "login problems"]) == (
        "charges", "bugs", "login")
    assert aliases_for(names, ["", "x", "y"]) == ("1", "2", "3")  # nothing to say: the numbers stay
