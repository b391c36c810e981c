"""Fakes and a callback recorder for the LangChain door's tests.

The embedded SmolLM2 model decides near chance, so a test that needs a *known* decision uses
:class:`FakeOpenAI`: an OpenAI-compatible stand-in that returns a fixed logprob window, because a
real model's choice cannot be fixed. Live tests (``local_server``) assert on mechanics only.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from jev_shared import AsyncSystemOneClient, SystemOneClient

#: Label A (first option / noul "true") far ahead of B: a confident first choice.
FIRST = {"A": -0.1, "B": -3.0}
#: Label B far ahead: a confident second choice (noul "false").
SECOND = {"A": -3.0, "B": -0.1}
#: A near tie: low confidence.
TIE = {"A": -0.69, "B": -0.70}


class BadRequest(Exception):
    """A non-transient provider failure (HTTP 400), so the engine does not retry it."""

    status_code = 400


class FakeOpenAI:
    """``chat.completions.create`` returning one token whose window is ``window`` (label → logprob)."""

    def __init__(self, window: dict[str, float] | None = None, *, delay: float = 0.0, fail: bool = False) -> None:
        self.window = window or FIRST
        self.delay = delay
        self.fail = fail
        self.calls: list[dict[str, Any]] = []
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def reply(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.fail:
            raise BadRequest("the provider is down")
        top = [{"token": t, "logprob": lp} for t, lp in self.window.items()]
        best = max(top, key=lambda e: e["logprob"])
        entry = {"token": best["token"], "logprob": best["logprob"], "top_logprobs": top}
        return {"choices": [{"message": {"role": "assistant", "content": best["token"]}, "finish_reason": "length",
                             "logprobs": {"content": [entry]}}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 1}}

    def _enter(self) -> None:
        with self._lock:
            self.active += 1
            self.peak = max(self.peak, self.active)

    def _leave(self) -> None:
        with self._lock:
            self.active -= 1

    def create(self, **kwargs: Any) -> dict[str, Any]:
        self._enter()
        try:
            time.sleep(self.delay)
            return self.reply(kwargs)
        finally:
            self._leave()


class AsyncFakeOpenAI(FakeOpenAI):
    async def create(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        self._enter()
        try:
            await asyncio.sleep(self.delay)
            return self.reply(kwargs)
        finally:
            self._leave()


def fake_client(window: dict[str, float] | None = None, **kw: Any) -> SystemOneClient:
    return SystemOneClient(FakeOpenAI(window, **kw), model="fake", labels="letters")


def fake_async_client(window: dict[str, float] | None = None, **kw: Any) -> AsyncSystemOneClient:
    return AsyncSystemOneClient(AsyncFakeOpenAI(window, **kw), model="fake", labels="letters")


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

    Stands in for an agent's own model: the embedded 135M model cannot drive an agent's tool calls.
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
