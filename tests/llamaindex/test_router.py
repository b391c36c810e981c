"""The selectors where LlamaIndex users put them: RouterQueryEngine and RouterRetriever.

Fixed decisions come from the fake client (a real model's pick cannot be fixed); the live tests
run the embedded SmolLM2 server and check mechanics only, since its decisions are near chance.
"""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.query_engine import RouterQueryEngine
from llama_index.core.retrievers import RouterRetriever

from jev_llamaindex import JevMultiSelector, JevSelectorResult, JevSingleSelector

from .conftest import AsyncFakeClient, FakeClient

CARS = {"A": -3.0, "B": -0.1, "C": -3.0}
CARS_AND_PLANES = {"A": -4.0, "B": -0.6, "C": -0.8}


def selectors(window, multi: bool = False):
    """(selector, sync fake, async fake): sync and async paths each on their own fake."""
    sync, async_ = FakeClient(window), AsyncFakeClient(window)
    make = JevMultiSelector if multi else JevSingleSelector
    return make.from_defaults(sync, async_client=async_, model="fake", labels="letters"), sync, async_


@pytest.mark.parametrize("use_async", [False, True])
def test_router_query_engine_single(engine_tools, mock_llm, use_async):
    tools, engines = engine_tools
    selector, sync, async_ = selectors(CARS)
    router = RouterQueryEngine(selector=selector, query_engine_tools=tools, llm=mock_llm)
    q = "How fast is a Ferrari?"
    response = asyncio.run(router.aquery(q)) if use_async else router.query(q)
    assert str(response) == "answer from cars"
    assert [e.queries for e in engines] == [[], [q], []]
    result = response.metadata["selector_result"]
    assert isinstance(result, JevSelectorResult) and result.ind == 1
    assert result.probabilities["cars"] > 0.9
    assert (len(async_.calls), len(sync.calls)) == ((1, 0) if use_async else (0, 1))


@pytest.mark.parametrize("use_async", [False, True])
def test_router_query_engine_multi(engine_tools, mock_llm, use_async):
    tools, engines = engine_tools
    selector, _, _ = selectors(CARS_AND_PLANES, multi=True)
    router = RouterQueryEngine(selector=selector, query_engine_tools=tools, llm=mock_llm)
    q = "Which is faster, a car or a plane?"
    response = asyncio.run(router.aquery(q)) if use_async else router.query(q)
    assert [e.queries for e in engines] == [[], [q], [q]]
    assert response.metadata["selector_result"].inds == [1, 2]


@pytest.mark.parametrize("use_async", [False, True])
def test_router_retriever_single(retriever_tools, mock_llm, use_async):
    tools, retrievers = retriever_tools
    selector, _, _ = selectors(CARS)
    router = RouterRetriever(selector=selector, retriever_tools=tools, llm=mock_llm)
    q = "How fast is a Ferrari?"
    nodes = asyncio.run(router.aretrieve(q)) if use_async else router.retrieve(q)
    assert [n.node.get_content() for n in nodes] == ["node from cars"]
    assert [r.queries for r in retrievers] == [[], [q], []]


@pytest.mark.parametrize("use_async", [False, True])
def test_router_retriever_multi(retriever_tools, mock_llm, use_async):
    tools, retrievers = retriever_tools
    selector, _, _ = selectors(CARS_AND_PLANES, multi=True)
    router = RouterRetriever(selector=selector, retriever_tools=tools, llm=mock_llm)
    q = "cars or planes?"
    nodes = asyncio.run(router.aretrieve(q)) if use_async else router.retrieve(q)
    assert sorted(n.node.get_content() for n in nodes) == ["node from cars", "node from planes"]
    assert retrievers[0].queries == []


def test_router_with_many_tools_routes_through_json(mock_llm):
    """30 engines: more than one letter token can name, so the engine reads a JSON answer."""
    from llama_index.core.tools import QueryEngineTool

    from .conftest import RecordingEngine

    names = [f"shelf_{i}" for i in range(30)]
    engines = [RecordingEngine(name=n, queries=[]) for n in names]
    tools = [QueryEngineTool.from_defaults(e, name=n, description=f"books on topic {i}")
             for i, (e, n) in enumerate(zip(engines, names))]
    fake = FakeClient(lambda kw: {"probabilities": {n: (0.8 if n == "shelf_27" else 0.2 / 29) for n in names}})
    router = RouterQueryEngine(selector=JevSingleSelector.from_defaults(fake, model="fake", labels="letters"), query_engine_tools=tools,
                               llm=mock_llm)
    response = router.query("topic 27")
    assert str(response) == "answer from shelf_27"
    assert response.metadata["selector_result"].method == "structured"


# -- live: the embedded SmolLM2 server ----------------------------------------------------------------


def live_selector(local_server, multi: bool = False, **kw):
    """Sync and async engine clients on the embedded server, built from plain openai clients."""
    make = JevMultiSelector if multi else JevSingleSelector
    return make.from_defaults(local_server.client(), async_client=local_server.async_client(),
                              model=local_server.model, **kw)


def assert_one_distribution(result: JevSelectorResult, n: int) -> None:
    assert result.keys and len(result.keys) == n
    assert sum(result.probabilities.values()) == pytest.approx(1.0)
    assert all(0 <= i < n for i in result.inds)


@pytest.mark.live
@pytest.mark.parametrize("use_async", [False, True])
def test_live_router_query_engine_single(local_server, engine_tools, mock_llm, use_async):
    tools, engines = engine_tools
    router = RouterQueryEngine(selector=live_selector(local_server), query_engine_tools=tools, llm=mock_llm)
    q = "How fast can a Ferrari go?"
    response = asyncio.run(router.aquery(q)) if use_async else router.query(q)
    result = response.metadata["selector_result"]
    assert_one_distribution(result, 3)
    assert len(result.inds) == 1 and result.method == "logprobs"
    picked = engines[result.ind]
    assert str(response) == f"answer from {picked.name}" and picked.queries == [q]
    assert sum(len(e.queries) for e in engines) == 1


@pytest.mark.live
def test_live_router_names_readout(local_server, engine_tools, mock_llm):
    """labels="names": the model answers with a tool's name; the engine still returns one distribution."""
    tools, engines = engine_tools
    router = RouterQueryEngine(selector=live_selector(local_server, labels="names"), query_engine_tools=tools,
                               llm=mock_llm)
    response = router.query("Do cats sleep a lot?")
    result = response.metadata["selector_result"]
    assert_one_distribution(result, 3)
    assert result.response.debug["labels"]["route"] in ("names", "letters")  # letters if the names' first tokens collide
    assert engines[result.ind].queries == ["Do cats sleep a lot?"]


@pytest.mark.live
@pytest.mark.parametrize("use_async", [False, True])
def test_live_router_retriever_multi(local_server, retriever_tools, mock_llm, use_async):
    tools, retrievers = retriever_tools
    selector = live_selector(local_server, multi=True, max_outputs=2)
    router = RouterRetriever(selector=selector, retriever_tools=tools, llm=mock_llm)
    nodes = asyncio.run(router.aretrieve("cars or planes?")) if use_async else router.retrieve("cars or planes?")
    queried = [r.name for r in retrievers if r.queries]
    assert 1 <= len(queried) <= 2
    assert sorted(n.node.get_content() for n in nodes) == sorted(f"node from {name}" for name in queried)


@pytest.mark.live
def test_live_multi_noul_router_query_engine(local_server, engine_tools, mock_llm):
    tools, engines = engine_tools
    selector = live_selector(local_server, multi=True, question="noul")
    router = RouterQueryEngine(selector=selector, query_engine_tools=tools, llm=mock_llm)
    response = router.query("How fast can a Ferrari go?")
    result = response.metadata["selector_result"]
    assert result.question == "noul" and set(result.probabilities) == {"cats", "cars", "planes"}
    assert all(0.0 <= p <= 1.0 for p in result.probabilities.values())
    assert result.inds, "never empty unless allow_empty"
    assert sorted(i for i, e in enumerate(engines) if e.queries) == sorted(result.inds)


@pytest.mark.live
def test_live_router_over_summary_indexes(local_server, mock_llm):
    """Real indexes (SummaryIndex needs no embeddings); the answer text comes from MockLLM, unchecked."""
    from llama_index.core import Document, SummaryIndex
    from llama_index.core.tools import QueryEngineTool

    texts = {"cats": "Cats sleep sixteen hours a day.", "cars": "A Ferrari reaches 340 km/h."}
    tools = [QueryEngineTool.from_defaults(SummaryIndex.from_documents([Document(text=t)]).as_query_engine(llm=mock_llm),
                                           name=n, description=f"Facts about {n}") for n, t in texts.items()]
    router = RouterQueryEngine(selector=live_selector(local_server), query_engine_tools=tools, llm=mock_llm)
    response = router.query("How fast is a Ferrari?")
    picked = response.metadata["selector_result"].keys[response.metadata["selector_result"].ind]
    assert [n.node.get_content() for n in response.source_nodes] == [texts[picked]]
