"""JevRerank: nodes sorted by a relevance distribution, on the real embedded server.

SmolLM2's relevance judgements are near chance, so the live tests check the contract, not the order a
good model would give: sorted by the blended key, ``top_n``, the retrieval facts kept, a flag rather
than a drop, the fallback on a real connection failure, the ReRank events, what each mode sends, and
the reranker inside LlamaIndex's own query engines (a VectorStoreIndex over a deterministic local
embedding, and a RouterRetriever). Where an order must be known, the provider double of conftest
(the real SDK over an in-process transport) answers a fixed window.
"""

from __future__ import annotations

import asyncio
import math
import socket

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.instrumentation.events.llm import LLMChatStartEvent
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.retrievers import RouterRetriever
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools import RetrieverTool

from jev_llamaindex import JevRerank, JevSingleSelector
from jev_llamaindex.hash_embedding import HashEmbedding
from jev_llamaindex.rerank import DEFAULT_RETRIEVAL_WEIGHT
from jev_llamaindex.rerank_modes import blend
from jev_shared import ProviderError, SystemOneClient
from tests.llamaindex.conftest import FakeClient

TEXTS = ["A Ferrari reaches 340 km/h.", "Cats sleep sixteen hours a day.", "The Eiffel tower is in Paris.",
         "Porsche makes fast cars; the 911 tops 300 km/h.", "Bread is made from flour and water."]
QUERY = "Which car is the fastest?"


def retrieved() -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t, id_=f"n{i}", metadata={"source": f"doc{i}"}), score=0.9 - i / 10)
            for i, t in enumerate(TEXTS)]


def dead_client() -> SystemOneClient:
    """An engine client whose server is gone: a real refused connection on loopback, no retries."""
    import openai

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return SystemOneClient(openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="-", max_retries=0),
                           model="gone", max_retries=0, method="logprobs", api="chat_completions")


def check_ranked(out: list[NodeWithScore], top_n: int, weight: float = DEFAULT_RETRIEVAL_WEIGHT) -> None:
    assert len(out) == top_n
    scores = [n.score for n in out]
    assert scores == sorted(scores, reverse=True) and all(0.0 <= s <= 1.0 for s in scores)
    for n in out:
        meta = n.node.metadata
        original = int(n.node.node_id[1:])
        assert meta["retrieval_rank"] == original and meta["retrieval_score"] == pytest.approx(0.9 - original / 10)
        assert n.score == pytest.approx(blend(meta["jev_relevance"], original, len(TEXTS), weight))
        assert 0.0 <= meta["jev_relevance"] <= 1.0 and 0.0 <= meta["jev_confidence"] <= 1.0
        assert meta["source"] == f"doc{original}"  # the node's own metadata stays
        assert "retrieval_score" not in n.node.get_content(metadata_mode="llm")  # ours stays out of the prompt


@pytest.mark.live
@pytest.mark.parametrize("mode", ["list", "score", "noul"])
def test_sorted_by_relevance_sync_and_async(local_server, mode):
    rerank = JevRerank.from_defaults(local_server.client(), model=local_server.model, top_n=3, mode=mode)
    nodes = retrieved()
    check_ranked(rerank.postprocess_nodes(nodes, query_str=QUERY), 3)
    check_ranked(asyncio.run(rerank.apostprocess_nodes(nodes, query_str=QUERY)), 3)
    assert all("retrieval_score" not in n.node.metadata for n in nodes)  # the docstore's nodes are not touched


@pytest.mark.live
def test_the_retrieval_weight_from_the_models_order_to_the_retrievers(local_server):
    def ranked(weight: float) -> list[NodeWithScore]:
        rerank = JevRerank.from_defaults(local_server.client(), model=local_server.model, top_n=5,
                                         retrieval_weight=weight)
        return rerank.postprocess_nodes(retrieved(), query_str=QUERY)

    model_only = ranked(0.0)
    check_ranked(model_only, 5, 0.0)
    assert all(n.score == n.node.metadata["jev_relevance"] for n in model_only)
    assert max(n.score for n in model_only) == 1.0  # list mode: the likeliest node of a question reads 1
    assert [n.node.node_id for n in ranked(1.0)] == ["n0", "n1", "n2", "n3", "n4"]


@pytest.mark.live
def test_list_mode_sends_one_question_over_the_nodes_per_batch(local_llm, events):
    """The nodes are the options (in retrieval order, lettered), the query is the state: one call per batch."""
    JevRerank.from_defaults(llm=local_llm, top_n=5).postprocess_nodes(retrieved(), query_str=QUERY)
    chats = [e for e in events if isinstance(e, LLMChatStartEvent)]
    assert len(chats) == 1
    system, user = str(chats[0].messages[0].content), str(chats[0].messages[-1].content)
    assert [system.index(t) for t in TEXTS] == sorted(system.index(t) for t in TEXTS)
    assert "A: passage 1" in system and "E: passage 5" in system and QUERY in user
    assert not any(t in user for t in TEXTS)
    events.clear()
    out = JevRerank.from_defaults(llm=local_llm, top_n=5, list_size=3).postprocess_nodes(retrieved(), query_str=QUERY)
    chats = [e for e in events if isinstance(e, LLMChatStartEvent)]
    # the two batches run concurrently, so their calls may start in either order
    systems = sorted((str(c.messages[0].content) for c in chats), key=lambda s: "C: passage 3" not in s)
    assert len(systems) == 2 and "C: passage 3" in systems[0] and TEXTS[3] not in systems[0]
    assert TEXTS[3] in systems[1] and "C: passage 3" not in systems[1]
    check_ranked(out, 5)


def test_list_mode_reads_the_window_and_blends_it_with_the_retrieval_order():
    """A fixed window (passage 4 likeliest, then 1): the model's order at weight 0, moved toward retrieval at 0.5."""
    client = FakeClient({"D": -0.1, "A": -1.0, "B": -6.0, "C": -6.0, "E": -6.0})
    engine = SystemOneClient(client, model="double", debias=False)
    out = JevRerank(engine, top_n=5, retrieval_weight=0.0).postprocess_nodes(retrieved(), query_str=QUERY)
    assert [n.node.node_id for n in out][:2] == ["n3", "n0"] and out[0].score == 1.0
    sent = client.calls[-1]
    assert sent["max_tokens"] == 1 and QUERY in sent["messages"][-1]["content"]
    assert all(t in sent["messages"][0]["content"] for t in TEXTS)
    p_a = out[1].node.metadata["jev_relevance"]
    assert p_a == pytest.approx(math.exp(-1.0) / math.exp(-0.1), rel=0.05)  # scaled so the likeliest reads 1
    blended = JevRerank(engine, top_n=5, retrieval_weight=0.5).postprocess_nodes(retrieved(), query_str=QUERY)
    assert [n.node.node_id for n in blended][:2] == ["n0", "n3"]  # first retrieved, and near the top for the model
    assert blended[0].score == pytest.approx(0.5 * p_a + 0.5)


@pytest.mark.live
def test_low_confidence_is_flagged_never_dropped(local_server):
    rerank = JevRerank.from_defaults(local_server.client(), model=local_server.model, top_n=5, min_confidence=1.0)
    out = rerank.postprocess_nodes(retrieved(), query_str=QUERY)
    assert len(out) == 5 and all(n.node.metadata["jev_low_confidence"] is True for n in out)
    unflagged = JevRerank.from_defaults(local_server.client(), model=local_server.model, top_n=2)
    assert all("jev_low_confidence" not in n.node.metadata for n in unflagged.postprocess_nodes(retrieved(),
                                                                                                query_str=QUERY))


@pytest.mark.live
def test_one_shared_prefix_per_query_and_the_node_as_the_state(local_llm, events):
    """The query and rubric are the system message (cached across nodes); each node's text is the user turn."""
    rerank = JevRerank.from_defaults(llm=local_llm, top_n=5, mode="noul")
    rerank.postprocess_nodes(retrieved(), query_str=QUERY)
    chats = [e for e in events if isinstance(e, LLMChatStartEvent)]
    assert len(chats) == len(TEXTS)
    systems = {str(e.messages[0].content) for e in chats}
    assert len(systems) == 1 and QUERY in systems.pop()
    users = sorted(str(e.messages[-1].content) for e in chats)
    assert all(any(t in u for u in users) for t in TEXTS) and all(QUERY not in u for u in users)


def test_events_and_the_fallback_to_retrieval_order(events):
    rerank = JevRerank(dead_client(), top_n=2)
    out = rerank.postprocess_nodes(retrieved(), query_str=QUERY)
    assert [n.node.node_id for n in out] == ["n0", "n1"] and [n.score for n in out] == pytest.approx([0.9, 0.8])
    assert all(n.node.metadata["jev_rerank_error"].startswith("ProviderError") for n in out)
    start = next(e for e in events if isinstance(e, ReRankStartEvent))
    end = next(e for e in events if isinstance(e, ReRankEndEvent))
    assert start.top_n == 2 and start.model_name == "gone" and len(start.nodes) == 5
    assert start.query.query_str == QUERY and [n.node.node_id for n in end.nodes] == ["n0", "n1"]
    asynced = asyncio.run(rerank.apostprocess_nodes(retrieved(), query_str=QUERY))
    assert [n.node.node_id for n in asynced] == ["n0", "n1"]


def test_on_error_raise():
    rerank = JevRerank(dead_client(), top_n=2, on_error="raise")
    with pytest.raises(ProviderError):
        rerank.postprocess_nodes(retrieved(), query_str=QUERY)
    with pytest.raises(ProviderError):
        asyncio.run(rerank.apostprocess_nodes(retrieved(), query_str=QUERY))


def test_misuse_is_refused_before_any_call():
    client = dead_client()
    with pytest.raises(ValueError, match="top_n"):
        JevRerank(client, top_n=0)
    with pytest.raises(ValueError, match="query_str"):
        JevRerank(client, mode="score", prompt="Is the passage relevant?")
    with pytest.raises(ValueError, match="no other variable"):
        JevRerank(client, prompt="Is it about {topic}?")
    with pytest.raises(ValueError, match="retrieval_weight"):
        JevRerank(client, retrieval_weight=1.5)
    with pytest.raises(ValueError, match="list_size"):
        JevRerank(client, list_size=27)
    with pytest.raises(ValueError, match="levels"):
        JevRerank(client, levels=["only one"])
    with pytest.raises(ValueError, match="min_confidence"):
        JevRerank(client, min_confidence=1.5)
    with pytest.raises(ValueError, match="mode"):
        JevRerank(client, mode="letters")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="query"):
        JevRerank(client).postprocess_nodes(retrieved())
    with pytest.raises(TypeError, match="from_defaults"):
        JevRerank(object())  # type: ignore[arg-type]
    assert JevRerank(client).postprocess_nodes([], query_str=QUERY) == []


def test_prompt_hooks_as_llmrerank_has_them():
    from llama_index.core.prompts import PromptTemplate

    rerank = JevRerank(dead_client(), mode="noul")
    assert "{query_str}" in rerank._get_prompts()["prompt"].get_template()
    rerank._update_prompts({"prompt": PromptTemplate("The passage is about: {query_str}")})
    assert rerank.question("cars").instructions == "The passage is about: cars"


@pytest.mark.live
def test_in_a_vector_store_query_engine(local_server, local_llm):
    from llama_index.llms.openai_like import OpenAILike

    index = VectorStoreIndex.from_documents([Document(text=t) for t in TEXTS], embed_model=HashEmbedding())
    writer = OpenAILike(model=local_server.model, api_base=local_server.base_url, api_key="local",
                        is_chat_model=True, max_tokens=8)
    rerank = JevRerank.from_defaults(llm=local_llm, top_n=2)
    engine = index.as_query_engine(llm=writer, similarity_top_k=4, node_postprocessors=[rerank])
    response = engine.query(QUERY)
    assert len(response.source_nodes) == 2 and str(response).strip()
    assert all("retrieval_score" in n.node.metadata for n in response.source_nodes)
    scores = [n.score for n in response.source_nodes]
    assert scores == sorted(scores, reverse=True)
    aresponse = asyncio.run(engine.aquery(QUERY))
    assert len(aresponse.source_nodes) == 2


@pytest.mark.live
def test_after_a_router_retriever(local_server, local_llm):
    from llama_index.llms.openai_like import OpenAILike

    embed = HashEmbedding()
    cars = VectorStoreIndex.from_documents([Document(text=t) for t in TEXTS[0::3]], embed_model=embed)
    misc = VectorStoreIndex.from_documents([Document(text=t) for t in TEXTS[1:3] + TEXTS[4:]], embed_model=embed)
    tools = [RetrieverTool.from_defaults(cars.as_retriever(similarity_top_k=3), name="cars", description="Cars."),
             RetrieverTool.from_defaults(misc.as_retriever(similarity_top_k=3), name="misc", description="Cats, Paris, bread.")]
    router = RouterRetriever(selector=JevSingleSelector.from_defaults(llm=local_llm), retriever_tools=tools,
                             llm=local_llm)
    writer = OpenAILike(model=local_server.model, api_base=local_server.base_url, api_key="local",
                        is_chat_model=True, max_tokens=8)
    engine = RetrieverQueryEngine.from_args(router, llm=writer,
                                            node_postprocessors=[JevRerank.from_defaults(llm=local_llm, top_n=1)])
    response = engine.query(QUERY)
    assert len(response.source_nodes) == 1 and "jev_relevance" in response.source_nodes[0].node.metadata


@pytest.mark.live
def test_the_example_runs_on_the_embedded_model():
    import os
    import subprocess
    import sys
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "llamaindex_rerank.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["JEV_MODEL"] = "smollm2-135m"  # fast; its relevance is near chance
    out = subprocess.run([sys.executable, str(example)], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.count("Q: ") == 2 and out.stdout.count("   relevance ") == 4
