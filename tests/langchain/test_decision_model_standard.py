"""LangChain's decision-model checks (its coming standard suite), as our own tests of JevDecisionModel.

Each check runs on the real embedded server over loopback, with three backends: a sync engine client,
an async engine client, and a LangChain chat model (``ChatOpenAI`` with logprobs). A counting HTTP
transport under each shows what reached the server.

- invoke, ainvoke, batch, abatch, stream and astream each give exactly one response per request;
- an empty request (no questions) is refused before any call;
- ``batch(..., return_exceptions=True)`` keeps the input order, the failure in its place.

The questions are choices: a choice the model gives no signal on takes its default option, so a
135M model's silences cannot make a mechanical check flaky.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from langchain_core.decisions import Choice, ClassifierResponse

from jev_langchain import JevDecisionModel
from jev_shared import AsyncSystemOneClient, ClientCapabilityError, InvalidQuestionError, SystemOneClient

pytestmark = pytest.mark.live

TEAM = Choice(instructions="Which team should handle this ticket?",
              criteria={"billing": "Invoices and refunds", "technical": "Bugs and outages"})


def request(qid: str = "team", state: str = "I was charged twice") -> dict[str, Any]:
    return {"state": state, "questions": {qid: TEAM}}


EMPTY: dict[str, Any] = {"state": "I was charged twice", "questions": {}}


class Counted:
    """Requests that reached the server, counted under the HTTP clients (sync and async)."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def seen(self) -> None:
        with self.lock:
            self.n += 1

    def sync(self) -> httpx.Client:
        counted, inner = self, httpx.HTTPTransport()

        class Transport(httpx.BaseTransport):
            def handle_request(self, req: httpx.Request) -> httpx.Response:
                counted.seen()
                return inner.handle_request(req)

        return httpx.Client(transport=Transport(), timeout=120)

    def async_(self) -> httpx.AsyncClient:
        counted, inner = self, httpx.AsyncHTTPTransport()

        class Transport(httpx.AsyncBaseTransport):
            async def handle_async_request(self, req: httpx.Request) -> httpx.Response:
                counted.seen()
                return await inner.handle_async_request(req)

        return httpx.AsyncClient(transport=Transport(), timeout=120)


def sync_model(srv: Any, counted: Counted) -> JevDecisionModel:
    import openai

    client = openai.OpenAI(base_url=srv.base_url, api_key="local", http_client=counted.sync())
    return JevDecisionModel(client=SystemOneClient(client, model=srv.model))


def async_model(srv: Any, counted: Counted) -> JevDecisionModel:
    import openai

    client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="local", http_client=counted.async_())
    return JevDecisionModel(client=AsyncSystemOneClient(client, model=srv.model))


def chat_model(srv: Any, counted: Counted) -> JevDecisionModel:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(base_url=srv.base_url, api_key="local", model=srv.model, logprobs=True, top_logprobs=20,
                     max_retries=0, http_client=counted.sync(), http_async_client=counted.async_())
    return JevDecisionModel(client=llm)


BACKENDS: dict[str, Callable[[Any, Counted], JevDecisionModel]] = {
    "sync client": sync_model, "async client": async_model, "chat model": chat_model}
SYNC_BACKENDS = ["sync client", "chat model"]


@pytest.fixture(params=list(BACKENDS))
def backend(request, local_server):
    counted = Counted()
    return request.param, BACKENDS[request.param](local_server, counted), counted


def one(resp: Any, qid: str = "team") -> None:
    assert isinstance(resp, ClassifierResponse) and list(resp.answers) == [qid]
    assert resp.choices[qid].choice in TEAM.criteria


async def collect(stream: Any) -> list[Any]:
    return [chunk async for chunk in stream]


@pytest.mark.slow
def test_async_entry_points_give_exactly_one_response(backend):
    _, model, counted = backend

    async def checks() -> None:  # one event loop: an async HTTP client belongs to the loop it first ran on
        one(await model.ainvoke(request()))
        outs = await model.abatch([request("a"), request("b")])
        assert len(outs) == 2 and [list(o.answers) for o in outs] == [["a"], ["b"]]
        chunks = await collect(model.astream(request()))
        assert len(chunks) == 1
        one(chunks[0])

    asyncio.run(checks())
    assert counted.n >= 4  # every request reached the server: nothing was answered from nowhere


@pytest.mark.parametrize("name", SYNC_BACKENDS)
def test_sync_entry_points_give_exactly_one_response(local_server, name):
    counted = Counted()
    model = BACKENDS[name](local_server, counted)
    one(model.invoke(request()))
    outs = model.batch([request("a"), request("b"), request("c")])
    assert len(outs) == 3 and [list(o.answers) for o in outs] == [["a"], ["b"], ["c"]]
    chunks = list(model.stream(request()))
    assert len(chunks) == 1
    one(chunks[0])


def test_an_async_client_refuses_sync_calls_by_name(local_server):
    model = async_model(local_server, Counted())
    with pytest.raises(ClientCapabilityError, match="async"):
        model.invoke(request())


def test_an_empty_request_is_refused_before_any_call(backend):
    name, model, counted = backend

    async def checks() -> None:
        with pytest.raises(InvalidQuestionError, match="at least one question"):
            await model.ainvoke(EMPTY)
        with pytest.raises(InvalidQuestionError):
            await collect(model.astream(EMPTY))

    asyncio.run(checks())
    if name in SYNC_BACKENDS:
        with pytest.raises(InvalidQuestionError):
            model.invoke(EMPTY)
        with pytest.raises(InvalidQuestionError):
            list(model.stream(EMPTY))
    assert counted.n == 0


def test_batch_with_return_exceptions_keeps_order(backend):
    name, model, _ = backend
    inputs = [request("first"), EMPTY, request("third")]
    check_in_order(asyncio.run(model.abatch(inputs, return_exceptions=True)))
    if name in SYNC_BACKENDS:
        check_in_order(model.batch(inputs, return_exceptions=True))


def check_in_order(outs: list[Any]) -> None:
    assert len(outs) == 3
    one(outs[0], "first")
    assert isinstance(outs[1], InvalidQuestionError)
    one(outs[2], "third")
