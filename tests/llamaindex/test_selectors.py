"""The selectors on their own, on the provider double whose decision is fixed (see conftest.FakeClient)."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import openai
import pytest
from llama_index.core.prompts import PromptTemplate
from llama_index.core.query_engine import RouterQueryEngine
from llama_index.core.tools.types import ToolMetadata

from jev_llamaindex import JevMultiSelector, JevSelectionEvent, JevSelectorResult, JevSingleSelector, LowConfidenceError
from jev_shared import ClientCapabilityError, InvalidQuestionError, JevError, SystemOneClient

from .conftest import TOOLS, AsyncFakeClient, FakeClient, prompt_of

META = [ToolMetadata(name=n, description=d) for n, d in TOOLS]
#: B (cars) most likely: softmax over A, B, C of these logprobs.
WINDOW = {"A": -2.0, "B": -0.2, "C": -3.0}
#: The same, answered with the tools' names (labels="names").
NAMES = {"cats": -2.0, "cars": -0.2, "planes": -3.0}


def softmax(lps: list[float]) -> list[float]:
    ex = [math.exp(x) for x in lps]
    return [x / sum(ex) for x in ex]


def over(selector: type, respond, **kw) -> tuple[Any, openai.OpenAI]:
    """A selector built the user's way on the provider double, and the double (its requests on ``.calls``)."""
    kw.setdefault("labels", "letters")  # the fake windows hold letters
    fake = FakeClient(respond)
    return selector.from_defaults(fake, model="fake", **kw), fake


def single(respond=WINDOW, **kw) -> tuple[JevSingleSelector, openai.OpenAI]:
    return over(JevSingleSelector, respond, **kw)


def test_single_reads_the_distribution_and_says_it_in_words():
    selector, fake = single()
    result = selector.select(META, "How fast is a Ferrari?")
    assert isinstance(result, JevSelectorResult)
    assert result.ind == 1
    assert result.keys == ["cats", "cars", "planes"]
    assert result.distribution == pytest.approx(softmax([-2.0, -0.2, -3.0]))
    assert result.method == "logprobs"
    assert "'cars'" in result.reason and f"{result.probabilities['cars']:.2f}" in result.reason
    assert f"confidence {result.confidence:.2f}" in result.reason
    sent = prompt_of(fake.calls[0])
    assert "cars — Facts about cars" in sent and "How fast is a Ferrari?" in sent


def test_nameless_choices_are_keyed_choice_n():
    selector, fake = single()
    result = selector.select(["about cats", "about cars", "about planes"], "q")
    assert result.keys == ["choice_1", "choice_2", "choice_3"]
    assert "choice_2 — about cars" in prompt_of(fake.calls[0])


def test_llamaindex_placeholder_names_count_as_missing():
    """QueryEngineTool.from_defaults without name= names every tool 'query_engine_tool': not a duplicate."""
    from llama_index.core.tools import QueryEngineTool, RetrieverTool

    from .conftest import RecordingEngine, RecordingRetriever

    for tools in ([QueryEngineTool.from_defaults(RecordingEngine(name=n), description=d) for n, d in TOOLS],
                  [RetrieverTool.from_defaults(RecordingRetriever(n), description=d) for n, d in TOOLS]):
        selector, _ = single()
        result = selector.select([t.metadata for t in tools], "q")
        assert result.keys == ["choice_1", "choice_2", "choice_3"] and result.ind == 1


def test_names_readout_on_request():
    selector, fake = single(NAMES, labels="names")
    result = selector.select(META, "q")
    assert result.ind == 1 and result.distribution == pytest.approx(softmax([-2.0, -0.2, -3.0]))
    assert "exactly one option name (cats, cars, planes)" in prompt_of(fake.calls[0])
    selector, fake = single(labels="letters")
    selector.select(META, "q")
    assert "exactly one letter" in prompt_of(fake.calls[0])
    fake = FakeClient(NAMES)
    assert JevSingleSelector.from_defaults(fake, model="fake").select(META, "q").ind == 1  # the client's default
    assert "exactly one option name" in prompt_of(fake.calls[0])


def test_multiline_descriptions_become_one_line():
    selector, fake = single()
    selector.select([ToolMetadata(name="a", description="one\ntwo"), ToolMetadata(name="b", description="x")], "q")
    assert "a — one two" in prompt_of(fake.calls[0])


@pytest.mark.parametrize("make", [JevSingleSelector, JevMultiSelector])
def test_empty_choices_rejected_before_any_request(make):
    fake = FakeClient(WINDOW)
    selector = make.from_defaults(fake, model="fake", labels="letters")
    with pytest.raises(InvalidQuestionError, match="no choices"):
        selector.select([], "q")
    assert fake.calls == []


@pytest.mark.parametrize("make", [JevSingleSelector, JevMultiSelector])
def test_duplicate_names_rejected_before_any_request(make):
    fake = FakeClient(WINDOW)
    selector = make.from_defaults(fake, model="fake", labels="letters")
    dup = [ToolMetadata(name="sql", description="a"), ToolMetadata(name="sql ", description="b")]
    with pytest.raises(InvalidQuestionError, match=r"duplicate tool names \['sql'\]"):
        selector.select(dup, "q")
    assert fake.calls == []


def test_low_confidence_raises_with_the_distribution():
    selector, _ = single({"A": -1.0, "B": -1.1, "C": -1.2}, min_confidence=0.5)
    with pytest.raises(LowConfidenceError, match="below min_confidence 0.50") as err:
        selector.select(META, "q")
    assert isinstance(err.value, JevError)
    assert err.value.result.confidence < 0.5
    assert sum(err.value.result.probabilities.values()) == pytest.approx(1.0)


def test_low_confidence_falls_back_to_default_index():
    selector, _ = single({"A": -1.0, "B": -1.1, "C": -1.2}, min_confidence=0.5, default_index=2)
    result = selector.select(META, "q")
    assert result.ind == 2
    assert "Fell back to default_index 2 ('planes'" in result.reason
    assert result.note and "min_confidence" in result.note


def test_confident_pick_ignores_default_index():
    selector, _ = single({"A": -5.0, "B": -0.01, "C": -5.0}, min_confidence=0.5, default_index=2)
    result = selector.select(META, "q")
    assert result.ind == 1 and result.note is None


def test_default_index_out_of_range():
    selector, fake = single(min_confidence=0.9, default_index=7)
    with pytest.raises(ValueError, match="default_index: 7 is out of range for 3 choices"):
        selector.select(META, "q")
    assert fake.calls == []


def test_prompt_is_exposed_and_customisable():
    selector, fake = single()
    prompts = selector.get_prompts()
    assert isinstance(prompts["prompt"], PromptTemplate) and "{num_choices}" in prompts["prompt"].template
    selector.update_prompts({"prompt": PromptTemplate("Route '{query_str}' to one of {num_choices} shelves.")})
    selector.select(META, "Where is my cat?")
    assert "Question: Route 'Where is my cat?' to one of 3 shelves." in prompt_of(fake.calls[0])


def test_prompt_customised_through_the_router(engine_tools, mock_llm):
    selector, fake = single()
    tools, _ = engine_tools
    router = RouterQueryEngine(selector=selector, query_engine_tools=tools, llm=mock_llm)
    assert "selector:prompt" in router.get_prompts()
    router.update_prompts({"selector:prompt": PromptTemplate("Pick a shelf.")})
    router.query("q")
    assert "Question: Pick a shelf." in prompt_of(fake.calls[0])


def test_prompt_with_unknown_variables_is_rejected():
    selector, _ = single()
    with pytest.raises(ValueError, match=r"\['topic'\]"):
        selector.update_prompts({"prompt": PromptTemplate("About {topic}?")})


def test_selection_event_carries_the_distribution(events):
    selector, _ = single()
    result = selector.select(META, "q")
    mine = [e for e in events if isinstance(e, JevSelectionEvent)]
    assert len(mine) == 1
    assert mine[0].selector == "JevSingleSelector" and mine[0].query_str == "q"
    assert mine[0].result.probabilities == result.probabilities


def test_low_confidence_is_emitted_before_raising(events):
    selector, _ = single({"A": -1.0, "B": -1.0, "C": -1.0}, min_confidence=0.5)
    with pytest.raises(LowConfidenceError):
        selector.select(META, "q")
    assert [e.result.note for e in events if isinstance(e, JevSelectionEvent)] == ["below min_confidence"]


def test_async_uses_the_async_client():
    sync, async_ = FakeClient(WINDOW), AsyncFakeClient(WINDOW)
    selector = JevSingleSelector.from_defaults(sync, async_client=async_, model="fake", labels="letters")
    result = asyncio.run(selector.aselect(META, "q"))
    assert result.ind == 1
    assert len(async_.calls) == 1 and sync.calls == []


def test_async_without_async_client_runs_the_sync_one():
    selector, fake = single()
    assert asyncio.run(selector.aselect(META, "q")).ind == 1
    assert len(fake.calls) == 1


def test_sync_with_only_async_client_says_what_to_do():
    selector = JevSingleSelector.from_defaults(async_client=AsyncFakeClient(WINDOW), model="fake", labels="letters")
    with pytest.raises(ClientCapabilityError, match="only an async client"):
        selector.select(META, "q")


def test_from_defaults_needs_a_model_for_a_raw_client():
    with pytest.raises(ValueError, match="model"):
        JevSingleSelector.from_defaults(FakeClient(WINDOW))


def test_init_takes_engine_clients_only():
    with pytest.raises(TypeError, match="from_defaults"):
        JevSingleSelector(FakeClient(WINDOW))  # type: ignore[arg-type]
    assert JevSingleSelector(SystemOneClient(FakeClient(WINDOW), model="fake", labels="letters")).select(META, "q").ind == 1


def test_options_past_26_use_a_json_method():
    """27+ options cannot be named by one letter token: the engine's structured readout answers.

    (By name, the engine reads up to 255 options from one or two tokens: tests/test_cassettes_names.py.)"""
    names = [f"tool_{i}" for i in range(30)]
    fake = FakeClient(lambda kw: {"probabilities": {n: (0.9 if n == "tool_28" else 0.1 / 29) for n in names}})
    meta = [ToolMetadata(name=n, description=f"about {n}") for n in names]
    for method in ("auto", "logprobs"):  # a token method on the client is switched to structured for this call
        selector = JevSingleSelector.from_defaults(fake, model="fake", method=method, labels="letters")
        result = selector.select(meta, "q")
        assert result.ind == 28 and result.method == "structured"
        assert fake.calls[-1]["response_format"]["type"] == "json_schema"


# -- multi -----------------------------------------------------------------------------------------

MULTI_WINDOW = {"A": -3.0, "B": -0.5, "C": -0.9}  # cars ~0.59, planes ~0.39, cats ~0.03


def multi(respond=MULTI_WINDOW, **kw) -> tuple[JevMultiSelector, openai.OpenAI]:
    return over(JevMultiSelector, respond, **kw)


def test_multi_keeps_every_candidate_over_threshold_most_probable_first():
    selector, _ = multi()
    result = selector.select(META, "q")
    assert result.inds == [1, 2]
    assert all(">= threshold 0.20" in r for r in result.reasons)


def test_multi_caps_at_max_outputs():
    selector, _ = multi(max_outputs=1)
    assert selector.select(META, "q").inds == [1]


def test_multi_falls_back_to_the_top_candidate_unless_empty_is_allowed():
    selector, _ = multi(threshold=0.9)
    result = selector.select(META, "q")
    assert result.inds == [1] and result.note and "kept the most probable" in result.note
    selector, _ = multi(threshold=0.9, allow_empty=True)
    assert selector.select(META, "q").inds == []


def yes_for(*names: str):
    """Noul per candidate: 'A' (true) when the statement is about one of ``names``."""
    def respond(kw):
        about = prompt_of(kw).split("The tool '", 1)[1].split("'", 1)[0]
        return {"A": -0.1, "B": -2.5} if about in names else {"A": -3.0, "B": -0.05}
    return respond


def test_multi_noul_asks_once_per_candidate():
    selector, fake = multi(yes_for("cars", "planes"), question="noul")
    result = selector.select(META, "q")
    assert sorted(result.inds) == [1, 2]
    assert len(fake.calls) == 3
    assert result.question == "noul" and result.confidence is None
    assert result.probabilities["cats"] < 0.5 < result.probabilities["cars"]


def test_multi_noul_with_yes_no_words():
    def respond(kw):
        return {"yes": -0.1, "no": -2.5} if "'cars'" in prompt_of(kw) else {"yes": -3.0, "no": -0.05}
    selector, fake = multi(respond, question="noul", labels="names")
    assert selector.select(META, "q").inds == [1]
    assert "exactly one word (yes, no)" in prompt_of(fake.calls[0])


def test_multi_noul_async():
    fake = AsyncFakeClient(yes_for("cats"))
    selector = JevMultiSelector.from_defaults(async_client=fake, model="fake", question="noul", labels="letters")
    assert asyncio.run(selector.aselect(META, "q")).inds == [0]


def test_multi_noul_prompt_must_name_the_candidate():
    selector, _ = multi(question="noul")
    with pytest.raises(ValueError, match="choice_name"):
        selector.update_prompts({"prompt": PromptTemplate("Is it relevant to {query_str}?")})
    selector.update_prompts({"prompt": PromptTemplate("The tool '{choice_name}' fits.")})
    assert "{choice_name}" in selector.get_prompts()["prompt"].template


@pytest.mark.parametrize("kw", [{"threshold": 1.5}, {"max_outputs": 0}, {"question": "score"}])
def test_multi_rejects_bad_options(kw):
    with pytest.raises(ValueError):
        multi(**kw)
