"""The engine's per-call caches: what is kept between calls never
mixes two different questions, and a question changed in place is prepared anew, never served stale."""

from __future__ import annotations

import pytest

from jev_shared import Choice, InvalidQuestionError, Score
from jev_shared.questions import _PREPARED, prepare_question, prepare_questions

TEAM = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "Invoices", "sales": "Plans"}}


@pytest.fixture(autouse=True)
def empty_cache():
    _PREPARED.clear()
    yield
    _PREPARED.clear()


def test_a_prepared_question_is_kept_and_served_again():
    first = prepare_question("team", dict(TEAM), "auto")
    assert prepare_question("team", dict(TEAM), "auto") is first
    assert len(_PREPARED) == 1


def test_two_questions_under_one_id_are_never_mixed():
    a = prepare_question("q", TEAM, "auto")
    b = prepare_question("q", {**TEAM, "criteria": {"billing": "Invoices", "technical": "Bugs"}}, "auto")
    c = prepare_question("q", {**TEAM, "instructions": "Which other team?"}, "auto")
    d = prepare_question("q", {**TEAM, "criteria": {"sales": "Plans", "billing": "Invoices"}}, "auto")  # order
    assert a.keys == ("billing", "sales") and b.keys == ("billing", "technical")
    assert c.question.instructions == "Which other team?" and a.question.instructions == "Which team?"
    assert d.keys == ("sales", "billing")
    assert prepare_question("other", TEAM, "auto").id == "other"  # the id is part of what is kept


def test_a_dict_changed_in_place_is_prepared_anew():
    raw = {"type": "choice", "instructions": "pick", "criteria": {"a": "first", "b": "second"}}
    assert prepare_question("q", raw, "auto").descriptions == ("first", "second")
    raw["criteria"]["c"] = "third"
    assert prepare_question("q", raw, "auto").keys == ("a", "b", "c")
    raw["criteria"]["a"] = "changed"
    assert prepare_question("q", raw, "auto").descriptions == ("changed", "second", "third")
    raw["instructions"] = "pick again"
    assert prepare_question("q", raw, "auto").question.instructions == "pick again"


def test_a_model_changed_in_place_is_prepared_anew_and_the_kept_one_is_apart():
    q = Choice(instructions="pick", criteria={"a": "first", "b": "second"})
    kept = prepare_question("q", q, "auto")
    assert kept.question == q and kept.question is not q  # a copy of its own: the caller's dicts stay theirs
    q.criteria["c"] = "third"  # frozen forbids setting a field, not changing its dict
    assert prepare_question("q", q, "auto").keys == ("a", "b", "c")
    assert kept.question.criteria == {"a": "first", "b": "second"}
    assert prepare_question("q", Choice(instructions="pick", criteria={"a": "first", "b": "second"}),
                            "auto").keys == ("a", "b")


def test_values_that_print_alike_do_not_share_an_entry():
    prepare_question("q", {**TEAM, "criteria": {"1": "one", "2": "two"}}, "auto")
    with pytest.raises(InvalidQuestionError) as err:  # int keys are refused, whatever was kept for "1"
        prepare_question("q", {**TEAM, "criteria": {1: "one", 2: "two"}}, "auto")
    assert err.value.field == "criteria.1.[key]"
    with pytest.raises(InvalidQuestionError):
        prepare_question("q", {**TEAM, "instructions": ["Which team?"]}, "auto")
    score = {"type": "score", "instructions": "How urgent?", "criteria": ["low", "high"]}
    assert prepare_question("s", score, "auto").descriptions == ("low", "high")
    tupled = prepare_question("s", {**score, "criteria": ("low", "high")}, "auto")  # not kept, prepared alike
    assert tupled.descriptions == ("low", "high") and len(_PREPARED) == 2
    assert prepare_question("s", Score(**score), "auto").kind == "score"  # a model and its dict: two entries
    assert len(_PREPARED) == 3


def test_the_method_and_the_labels_are_part_of_the_key():
    many = {"type": "choice", "instructions": "pick", "criteria": {f"o{i}": "" for i in range(30)}}
    assert len(prepare_question("q", many, "logprobs", labels="names").keys) == 30
    with pytest.raises(InvalidQuestionError, match="at most 26"):
        prepare_question("q", many, "logprobs", labels="letters")
    with pytest.raises(InvalidQuestionError, match="at most 26"):
        prepare_question("q", many, "grammar", labels="names")


def test_an_invalid_question_is_refused_on_every_call():
    bad = {"type": "choice", "instructions": "  ", "criteria": {"a": ""}}
    for _ in range(2):
        with pytest.raises(InvalidQuestionError) as err:
            prepare_question("q", bad, "auto")
        assert err.value.field == "instructions"
    assert not _PREPARED


def test_questions_with_examples_are_not_kept():
    raw = {**TEAM, "examples": [{"state": "refund me", "answer": "billing"}]}
    assert len(prepare_question("q", raw, "auto").examples) == 1
    assert len(prepare_questions("state", {"q": TEAM}, "auto", call_examples={"q": [
        {"state": "a plan", "answer": "sales"}]})[0].examples) == 1
    assert not _PREPARED
    with pytest.raises(InvalidQuestionError, match="not one of the options"):
        prepare_question("q", {**TEAM, "examples": [{"state": "x", "answer": "nope"}]}, "auto")


def _planner():
    from jev_shared import SystemOneClient
    from tests.helpers import provider

    def never(req):
        raise AssertionError("no request is sent here")

    return SystemOneClient(provider(never), model="m")._planner


def test_call_options_are_kept_per_exact_value_and_refusals_repeat():
    planner = _planner()
    one = planner._for_call(None, None, None, "split", 1, None)
    assert planner._for_call(None, None, None, "split", 1, None) is one and one.top_logprobs == 1
    for _ in range(2):  # True == 1 and hashes alike: never served what 1 was
        with pytest.raises(InvalidQuestionError) as err:
            planner._for_call(None, None, None, "split", True, None)
        assert err.value.field == "top_logprobs"
    other = planner._for_call("structured", None, "letters", None, None, 3)
    assert (other.method, other.labels, other.max_concurrency, other.layout) == ("structured", "letters", 3,
                                                                                 planner.options.layout)
    assert planner._for_call(None, None, None, None, None, None) is planner.options


def test_call_options_follow_the_client_options_they_came_from():
    import dataclasses

    planner = _planner()
    assert planner._for_call(None, None, None, None, 5, None).method == "auto"
    planner.options = dataclasses.replace(planner.options, method="structured")
    assert planner._for_call(None, None, None, None, 5, None).method == "structured"


def test_a_question_usage_tally_sums_as_usage_does():
    from jev_shared.record import Record, _summed

    a, b = Record(False), Record(False)
    a.usage.n_calls, a.usage.n_retries = 2, 1
    a.usage.add_tokens(10, 1)
    b.usage.n_calls = 1
    b.usage.add_tokens(None, 2)
    usage = _summed([a, b], 1.5)
    assert (usage.input_tokens, usage.output_tokens, usage.n_calls, usage.n_retries) == (None, 3, 3, 1)
    assert usage.model_fields_set == {"input_tokens", "output_tokens", "n_calls", "n_retries", "latency_ms"}


def test_the_lean_wait_keeps_asyncio_waits_rules():
    import asyncio

    from jev_shared.calls import Budget
    from jev_shared.drive import run_tasks
    from jev_shared.errors import DecisionTimeoutError

    async def quick(value):
        await asyncio.sleep(0)
        return value

    async def slow():
        await asyncio.sleep(5)

    async def fails():
        raise ValueError("no")

    async def main():
        assert await run_tasks([lambda: quick(1), lambda: quick(2)], scout=False, budget=Budget.of(5.0)) == [1, 2]
        assert await run_tasks([lambda: quick(3)], scout=False, budget=Budget()) == [3]
        [err] = await run_tasks([fails], scout=False, budget=Budget.of(5.0))
        assert isinstance(err, ValueError)
        budget = Budget.of(0.05)
        with pytest.raises(DecisionTimeoutError):
            await run_tasks([lambda: quick(1), slow], scout=False, budget=budget)
        assert budget.cancelled
        outer = asyncio.ensure_future(run_tasks([slow], scout=False, budget=Budget()))
        await asyncio.sleep(0.01)
        outer.cancel()
        with pytest.raises(asyncio.CancelledError):
            await outer
        await asyncio.sleep(0)
        left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert all(t.cancelled() or t.cancelling() for t in left)

    asyncio.run(main())


def test_a_system_prompt_kept_on_a_question_is_its_format_s_own():
    from jev_shared.labels import LETTERS, style_for
    from jev_shared.prompt import render

    prep = prepare_question("team", TEAM, "auto")
    named = render(prep, "refund me", fmt=style_for(prep, "names").fmt)[0]["content"]
    letters = render(prep, "refund me", fmt=LETTERS.fmt)[0]["content"]
    assert "billing, sales" in named and "(A, B)" in letters
    assert render(prep, "refund me", fmt=style_for(prep, "names").fmt)[0]["content"] == named
    assert render(prep, "x", layout="split", fmt=LETTERS.fmt)[0]["content"] != letters
    other = prepare_question("team", {**TEAM, "instructions": "Which other team?"}, "auto")
    assert "Which other team?" in render(other, "x", fmt=style_for(other, "names").fmt)[0]["content"]


def test_an_id_that_is_not_text_is_refused_as_before():
    for qid in (["q"], 1, ""):
        with pytest.raises(InvalidQuestionError, match="non-empty strings"):
            prepare_question(qid, TEAM, "auto")
