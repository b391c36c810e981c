"""Fuzzing ``system_one``'s inputs: whatever a caller passes, the call answers or raises a JevError,
and an input it refuses (InvalidQuestionError, UnsupportedMethodError) costs 0 requests."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jev_shared import Choice, InvalidQuestionError, JevError, Noul, Score, SystemOneClient, UnsupportedMethodError
from tests.faults.replies import good
from tests.helpers import provider

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TEAM = Choice(instructions="Which team?", criteria={"billing": "money", "technical": "bugs", "sales": "plans"})


def CountingClient() -> Any:  # noqa: N802 - read as the double it is
    """The real openai client, answered like a sensible model would (the fault matrix's good reply); ``.wire``
    counts the requests."""
    return provider(good)


def nested(depth: int, kind: str) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value] if kind == "list" else {"k": value}
    return value


ODD = [None, 0, 5, 3.5, math.nan, math.inf, True, b"bytes", object(), {1, 2}, (), [], {}, "", "   ",
       {1: "int key"}, {"k": math.nan}, [{"role": "user"}], [{"role": "user", "content": "hi"}], "\ud800",
       "a\udfffb", {"k": "\ud800"}, "x" * 2_000_000, Choice, TEAM]
states = st.one_of(
    st.text(max_size=200),
    st.sampled_from(ODD),
    st.builds(nested, st.integers(1, 1500), st.sampled_from(["list", "dict"])),
    st.recursive(st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=20)),
                 lambda kids: st.one_of(st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=5), kids, max_size=4)),
                 max_leaves=20),
)
raw_questions = st.one_of(
    st.just(TEAM), st.just(Noul(instructions="The ticket is about money.")),
    st.just(Score(instructions="How urgent?", criteria=["low", "high"])),
    st.sampled_from([None, 5, "choice", [], {}, {"type": "choice"}, {"type": "bogus", "instructions": "x"},
                     {"type": "choice", "instructions": "x", "criteria": {}},
                     {"type": "choice", "instructions": "x", "criteria": {"a": "1", " a": "2"}},
                     {"type": "choice", "instructions": "", "criteria": {"a": ""}},
                     {"type": "score", "instructions": "x", "criteria": ["only one"]},
                     {"type": "noul", "instructions": "x", "criteria": {"maybe": "?"}},
                     {"type": "choice", "instructions": "x", "criteria": {f"o{i}": "" for i in range(300)}},
                     {"type": "choice", "instructions": "x", "criteria": {"a": 5}}]),
)
ids = st.one_of(st.text(max_size=8), st.integers(), st.none(), st.just(("t",)), st.just(1.5), st.just(b"id"))
question_maps = st.one_of(
    st.dictionaries(ids, raw_questions, max_size=4),
    st.just({1: TEAM, "1": TEAM}), st.just({"": TEAM}), st.just({" ": TEAM}),
    st.sampled_from([None, [], [TEAM], "questions", 5, {"q"}]),
)
garbage = st.one_of(st.none(), st.sampled_from(["", "bogus", 5, 1.5, True, ["auto"], "AUTO", " auto"]))
timeouts = st.one_of(st.none(), st.sampled_from([-1, 0, -0.0, math.nan, math.inf, -math.inf, "5", True, [], 30, 0.5]))


def check(state: Any, questions: Any, **options: Any) -> None:
    fake = CountingClient()
    client = SystemOneClient(fake, model="m", api="chat_completions", max_retries=0)
    try:
        client.system_one(state, questions, **options)
    except (InvalidQuestionError, UnsupportedMethodError):
        assert fake.wire == [], "a refused input cost a request"
    except JevError:
        pass
    # any other exception escapes and fails the example: every error must be a JevError


@FUZZ
@given(states)
def test_any_state(state: Any) -> None:
    check(state, {"q": TEAM})


@FUZZ
@given(question_maps)
def test_any_questions(questions: Any) -> None:
    check("I was charged twice.", questions)


@FUZZ
@given(timeouts, st.one_of(garbage, st.sampled_from(["auto", "logprobs", "structured", "discrete", "grammar"])),
       st.one_of(garbage, st.sampled_from(["system1", "system2", "auto"])),
       st.one_of(garbage, st.sampled_from(["names", "letters"])))
def test_any_options(timeout: Any, method: Any, mode: Any, labels: Any) -> None:
    check("I was charged twice.", {"q": TEAM}, timeout=timeout, method=method, mode=mode, labels=labels)


def test_int_and_str_ids_that_collide_are_refused_before_a_request() -> None:
    fake = CountingClient()
    client = SystemOneClient(fake, model="m", api="chat_completions")
    try:
        client.system_one("ticket", {1: TEAM, "1": TEAM})
    except InvalidQuestionError:
        pass
    else:
        raise AssertionError("{1: q, '1': q} was answered")
    assert fake.wire == []


@pytest.mark.parametrize("state", [nested(1000, "list"), nested(1000, "dict"), nested(5000, "list"), "\ud800",
                                   "a\udfffb", {"k": ["\ud800"]}, [{"role": "user", "content": "\udc00"}]],
                         ids=["list-1000", "dict-1000", "list-5000", "lone-high", "lone-low", "nested", "chat-turn"])
def test_unsendable_states_are_refused_naming_state(state: Any) -> None:
    """Outside hypothesis on purpose: it raises the recursion limit while it runs, hiding RecursionError."""
    fake = CountingClient()
    client = SystemOneClient(fake, model="m", api="chat_completions")
    with pytest.raises(InvalidQuestionError) as info:
        client.system_one(state, {"q": TEAM})
    assert info.value.field == "state" and fake.wire == []
