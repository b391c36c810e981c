"""Provider doubles and a callback recorder for the LangChain door's tests.

The embedded SmolLM2 model decides near chance, so a test that needs a *known* decision uses
:func:`window_openai`: the real ``openai.OpenAI`` over an in-process transport (``tests.helpers``)
whose every reply is one token with a fixed logprob window, because a real model's choice cannot
be fixed. The requests it was sent are on ``.wire``. Live tests (``local_server``) assert on
mechanics only.
"""

from __future__ import annotations

from typing import Any

import openai
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from jev_shared import AsyncSystemOneClient, SystemOneClient
from tests.helpers import aprovider, fails, provider, windows

#: Label A (first option / noul "true") far ahead of B: a confident first choice.
FIRST = {"A": -0.1, "B": -3.0}
#: Label B far ahead: a confident second choice (noul "false").
SECOND = {"A": -3.0, "B": -0.1}
#: A near tie: low confidence.
TIE = {"A": -0.69, "B": -0.70}
#: What a failing provider says (an HTTP 400, so the engine does not retry it).
DOWN = "the provider is down"


def _answers(window: dict[str, float] | None, fail: bool) -> Any:
    return fails(400, DOWN) if fail else windows(window or FIRST)


def _with_calls(client: Any) -> Any:
    client.calls = client.wire  # the name the hand-written fake had: each request body, as sent
    return client


def window_openai(window: dict[str, float] | None = None, *, delay: float = 0.0, fail: bool = False) -> openai.OpenAI:
    """A real ``openai.OpenAI`` answering every call with one token whose window is ``window`` (label → logprob),
    or, with ``fail``, a 400; ``delay`` seconds a request (``.wire.peak`` counts how many overlapped)."""
    return _with_calls(provider(_answers(window, fail), delay=delay))


def window_async_openai(window: dict[str, float] | None = None, *, delay: float = 0.0,
                        fail: bool = False) -> openai.AsyncOpenAI:
    """The async twin: a real ``openai.AsyncOpenAI``."""
    return _with_calls(aprovider(_answers(window, fail), delay=delay))


#: The names these doubles had when they were hand-written classes (other test files import them).
FakeOpenAI = window_openai
AsyncFakeOpenAI = window_async_openai


def fake_client(window: dict[str, float] | None = None, **kw: Any) -> SystemOneClient:
    return SystemOneClient(window_openai(window, **kw), model="fake", labels="letters")


def fake_async_client(window: dict[str, float] | None = None, **kw: Any) -> AsyncSystemOneClient:
    return AsyncSystemOneClient(window_async_openai(window, **kw), model="fake", labels="letters")


class Recorder(BaseCallbackHandler):
    """Every run start (chain, tool, chat model) and custom event, with its parent and tags."""

    def __init__(self) -> None:
        self.runs: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []

    def _start(self, kind: str, name: str | None, run_id: Any, parent_run_id: Any, tags: Any, metadata: Any,
               inputs: Any = None) -> None:
        self.runs.append({"kind": kind, "name": name, "id": run_id, "parent": parent_run_id, "tags": tags or [],
                          "metadata": metadata or {}, "inputs": inputs})

    def on_chain_start(self, serialized, inputs, *, run_id, parent_run_id=None, tags=None, metadata=None, **kw):
        self._start("chain", kw.get("name"), run_id, parent_run_id, tags, metadata, inputs)

    def on_tool_start(self, serialized, input_str, *, run_id, parent_run_id=None, tags=None, metadata=None, **kw):
        self._start("tool", kw.get("name") or (serialized or {}).get("name"), run_id, parent_run_id, tags, metadata)

    def on_chat_model_start(self, serialized, messages, *, run_id, parent_run_id=None, tags=None, metadata=None,
                            **kw):
        self._start("chat_model", kw.get("name"), run_id, parent_run_id, tags, metadata)

    def on_custom_event(self, name, data, *, run_id, tags=None, metadata=None, **kw):
        self.events.append({"name": name, "data": data, "run_id": run_id})

    def named(self, name: str) -> list[dict[str, Any]]:
        return [r for r in self.runs if r["name"] == name]

    def one(self, name: str) -> dict[str, Any]:
        found = self.named(name)
        assert len(found) == 1, f"expected one run named {name!r}, got {[r['name'] for r in self.runs]}"
        return found[0]


class ScriptedChatModel(BaseChatModel):
    """Replies with ``replies`` in turn (the last one repeats) and records what it was sent.

    Kept as a double on purpose: it stands in for an agent's own LangChain chat model, which must
    emit scripted *tool calls*; the embedded 135M model cannot drive them, and a real provider SDK is
    not what the agent loop calls (LangChain's ``BaseChatModel`` is).
    """

    replies: list[AIMessage]
    received: list[dict[str, Any]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.received.append({"messages": messages, "kwargs": kwargs})
        reply = self.replies[min(len(self.received), len(self.replies)) - 1]
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self
