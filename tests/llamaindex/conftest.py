"""Fixtures for the LlamaIndex door: a provider double on the real SDK, recording engines, small tools.

The provider double stands in for a model wherever a test needs a *fixed* decision: a real model's
choice cannot be fixed (the embedded SmolLM2 decides near chance), so :func:`FakeClient` is the real
``openai.OpenAI`` over an in-process transport (``tests.helpers``) answering a chosen logprob window
(or JSON reply), with every request it was sent on ``.calls`` (the bodies as they went over the wire).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import openai
import pytest
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.tools import QueryEngineTool, RetrieverTool

from tests.helpers import aprovider, provider
from tests.helpers import replies as r
from tests.helpers.wire import Request

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"

#: What the double answers: a window {token: logprob} for a token request, or a JSON-able object for a JSON one.
Respond = Callable[[Request], Any]


def prompt_of(request: Request) -> str:
    """The question's prompt as the model reads it: the system message (question, options) and the state."""
    return "\n\n".join(m["content"] for m in request["messages"])


def answering(respond: Respond | dict[str, float]) -> Callable[[Request], dict[str, Any]]:
    """A handler: a token window (sampled = the most likely) or, for a JSON request, the answer as its text."""
    answer_for = respond if callable(respond) else (lambda _req: respond)

    def handle(req: Request) -> dict[str, Any]:
        answer = answer_for(req)
        if "response_format" in req:
            return r.chat_json(answer, usage=(10, 5))
        return r.chat_tokens(answer, usage=(10, 1))

    return handle


def FakeClient(respond: Respond | dict[str, float]) -> openai.OpenAI:  # noqa: N802 - the name the tests import
    """A real ``openai.OpenAI`` answering with ``respond(request)``; ``.calls`` are the requests it was sent."""
    client = provider(answering(respond))
    client.calls = client.wire
    return client


def AsyncFakeClient(respond: Respond | dict[str, float]) -> openai.AsyncOpenAI:  # noqa: N802
    """The async twin: a real ``openai.AsyncOpenAI``."""
    client = aprovider(answering(respond))
    client.calls = client.wire
    return client


class RecordingEngine(CustomQueryEngine):
    """A query engine that answers with its name and records each query, so a test sees which ran."""

    name: str
    queries: list[str] = []

    def custom_query(self, query_str: str) -> str:
        self.queries.append(query_str)
        return f"answer from {self.name}"


class RecordingRetriever(BaseRetriever):
    """A retriever returning one node tagged with its name, recording each query."""

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        return [NodeWithScore(node=TextNode(text=f"node from {self.name}", id_=f"node-{self.name}"), score=1.0)]


TOOLS = [
    ("cats", "Facts about cats: sleep, food, breeds."),
    ("cars", "Facts about cars: speed, engines, brands."),
    ("planes", "Facts about planes: airlines, jets, airports."),
]


@pytest.fixture
def engine_tools() -> tuple[list[QueryEngineTool], list[RecordingEngine]]:
    engines = [RecordingEngine(name=n, queries=[]) for n, _ in TOOLS]
    tools = [QueryEngineTool.from_defaults(e, name=n, description=d) for e, (n, d) in zip(engines, TOOLS)]
    return tools, engines


@pytest.fixture
def retriever_tools() -> tuple[list[RetrieverTool], list[RecordingRetriever]]:
    retrievers = [RecordingRetriever(n) for n, _ in TOOLS]
    tools = [RetrieverTool.from_defaults(r, name=n, description=d) for r, (n, d) in zip(retrievers, TOOLS)]
    return tools, retrievers


@pytest.fixture
def mock_llm() -> MockLLM:
    """For the router's summarizer, whose text no test checks (and so nothing reaches OpenAI)."""
    return MockLLM()


class Collect(BaseEventHandler):
    events: list[Any] = []

    def handle(self, event: Any, **kwargs: Any) -> None:
        self.events.append(event)


@pytest.fixture
def events():
    """Every instrumentation event emitted during the test."""
    handler = Collect(events=[])
    root = get_dispatcher()
    root.add_event_handler(handler)
    yield handler.events
    root.event_handlers.remove(handler)


@pytest.fixture
def local_llm(local_server):
    """The user's own LlamaIndex LLM: OpenAILike on the embedded server, with logprobs on."""
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(model=local_server.model, api_base=local_server.base_url, api_key="local",
                      is_chat_model=True, logprobs=True, top_logprobs=20)
