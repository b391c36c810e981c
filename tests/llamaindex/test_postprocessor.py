"""JevRelevanceFilter: keep the retrieved nodes a Noul or Score judges relevant."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core import Document, SummaryIndex
from llama_index.core.schema import NodeWithScore, TextNode

from jev_llamaindex import JevRelevanceFilter
from jev_shared import Choice, Score

from .conftest import AsyncFakeClient, FakeClient, prompt_of

NODES = [NodeWithScore(node=TextNode(text=t), score=0.1) for t in
         ("A Ferrari reaches 340 km/h.", "Cats sleep sixteen hours a day.", "Porsche makes fast cars.")]


def about_cars(kw):
    """Fixed verdicts (a real model's cannot be fixed): 'true' (A) for passages about cars."""
    text = prompt_of(kw)
    return {"A": -0.05, "B": -3.0} if ("Ferrari" in text or "Porsche" in text) else {"A": -4.0, "B": -0.02}


def test_keeps_relevant_nodes_with_their_probability_in_order():
    fake = FakeClient(about_cars)
    kept = JevRelevanceFilter.from_defaults(fake, model="fake", labels="letters").postprocess_nodes(NODES, query_str="fast cars?")
    assert [n.node.get_content() for n in kept] == [NODES[0].node.get_content(), NODES[2].node.get_content()]
    assert all(n.score > 0.9 for n in kept)
    assert len(fake.calls) == 3 and "fast cars?" in prompt_of(fake.calls[0])


def test_async():
    fake = AsyncFakeClient(about_cars)
    flt = JevRelevanceFilter.from_defaults(async_client=fake, model="fake", labels="letters")
    kept = asyncio.run(flt.apostprocess_nodes(NODES, query_str="fast cars?"))
    assert len(kept) == 2 and len(fake.calls) == 3


def test_score_question_scaled_to_unit_interval():
    fake = FakeClient({"A": -5.0, "B": -5.0, "C": -0.01})  # level 2 of 0..2: fully relevant
    question = Score(instructions="How relevant is the passage to the question?",
                     criteria=["irrelevant", "partly", "relevant"])
    kept = JevRelevanceFilter.from_defaults(fake, model="fake", question=question, threshold=0.9,
                                            labels="letters").postprocess_nodes(
        NODES[:1], query_str="q")
    assert len(kept) == 1 and kept[0].score == pytest.approx(1.0, abs=0.02)


def test_inside_a_query_engine(mock_llm):
    index = SummaryIndex.from_documents([Document(text=n.node.get_content()) for n in NODES])
    flt = JevRelevanceFilter.from_defaults(FakeClient(about_cars), model="fake", labels="letters")
    response = index.as_query_engine(llm=mock_llm, node_postprocessors=[flt]).query("fast cars?")
    assert sorted(n.node.get_content() for n in response.source_nodes) == [
        "A Ferrari reaches 340 km/h.", "Porsche makes fast cars."]


def test_rejects_other_questions_and_a_missing_query():
    with pytest.raises(ValueError, match="Noul or a Score"):
        JevRelevanceFilter.from_defaults(FakeClient({}), model="fake", question=Choice(instructions="x", criteria={"a": ""}))
    with pytest.raises(ValueError, match="query"):
        JevRelevanceFilter.from_defaults(FakeClient({}), model="fake", labels="letters").postprocess_nodes(NODES)


@pytest.mark.live
def test_live_filter_mechanics(local_server):
    flt = JevRelevanceFilter.from_defaults(local_server.client(), model=local_server.model, threshold=0.0)
    kept = flt.postprocess_nodes(NODES, query_str="Which car is fast?")
    assert len(kept) == 3  # threshold 0 keeps all, each now scored by the model
    assert all(0.0 <= n.score <= 1.0 for n in kept) and any(n.score != 0.1 for n in kept)
