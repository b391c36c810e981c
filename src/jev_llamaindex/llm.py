"""The user's own LlamaIndex LLM as the engine's backend.

The engine talks to anything with ``chat.completions.create(**kwargs)``. These adapters give a
LlamaIndex ``LLM`` that shape, so a user's configured model (``OpenAI``, ``OpenAILike``, ...) serves
the decisions without a second client: each request becomes ``llm.chat(messages, **kwargs)`` and
the ``ChatResponse`` comes back as a Chat Completions dict.

The reply is taken from ``ChatResponse.raw`` when that is a Chat Completion (the OpenAI
integrations keep it), because only the raw reply holds the *sampled* token: LlamaIndex's own
``ChatResponse.logprobs`` keeps, per position, just the ``top_logprobs`` alternatives. Otherwise the
sampled token is recovered from the reply text (see :func:`chat_response_to_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, LogProb

from jev_shared import AsyncSystemOneClient, ClientCapabilityError, SystemOneClient

__all__ = [
    "LlamaIndexLLMClient",
    "AsyncLlamaIndexLLMClient",
    "system_one_clients",
    "chat_response_to_dict",
]


def _check_llm(llm: Any) -> None:
    """Fail early, in words, where the adapter cannot work: no chat, or a completions-only setup."""
    if not callable(getattr(llm, "chat", None)) or not callable(getattr(llm, "achat", None)):
        raise ClientCapabilityError(f"{type(llm).__name__} has no chat()/achat(); pass a LlamaIndex LLM")
    metadata = getattr(llm, "metadata", None)
    if metadata is not None and not getattr(metadata, "is_chat_model", True):
        raise ClientCapabilityError(
            f"{type(llm).__name__} is not set up as a chat model, so LlamaIndex would flatten the engine's chat "
            "turns into a completions prompt (where logprobs are read differently); for OpenAILike pass "
            "is_chat_model=True"
        )


def _messages(raw: Sequence[Mapping[str, Any]]) -> list[ChatMessage]:
    return [ChatMessage(role=m["role"], content=m.get("content")) for m in raw]


def _llm_kwargs(kwargs: Mapping[str, Any]) -> tuple[list[ChatMessage], dict[str, Any]]:
    """The engine's request as ``llm.chat`` arguments; the LLM keeps its own model name."""
    rest = {k: v for k, v in kwargs.items() if k not in ("messages", "model")}
    return _messages(kwargs.get("messages") or []), rest


class _LLMCompletions:
    """What the sync and async ``completions`` share: the LLM (the request and reply mapping are functions)."""

    def __init__(self, llm: Any) -> None:
        self._llm = llm


class _Completions(_LLMCompletions):
    """``create(**kwargs)`` over ``llm.chat``."""

    def create(self, **kwargs: Any) -> dict[str, Any]:
        messages, rest = _llm_kwargs(kwargs)
        return chat_response_to_dict(self._llm.chat(messages, **rest))


class _AsyncCompletions(_LLMCompletions):
    """The same over ``llm.achat``: only the call is awaited."""

    async def create(self, **kwargs: Any) -> dict[str, Any]:
        messages, rest = _llm_kwargs(kwargs)
        return chat_response_to_dict(await self._llm.achat(messages, **rest))


class _Chat:
    def __init__(self, completions: _LLMCompletions) -> None:
        self.completions = completions


class _Adapter:
    """A LlamaIndex LLM in the OpenAI SDK's shape (``.chat.completions.create``), checked on the way in."""

    _completions: type[_LLMCompletions] = _Completions

    def __init__(self, llm: Any) -> None:
        _check_llm(llm)
        self.llm = llm
        self.chat = _Chat(self._completions(llm))


class LlamaIndexLLMClient(_Adapter):
    """``chat.completions.create(**kwargs)`` over ``llm.chat``: a LlamaIndex LLM as an OpenAI-style client."""


class AsyncLlamaIndexLLMClient(_Adapter):
    """The async twin: ``await chat.completions.create(**kwargs)`` over ``llm.achat``."""

    _completions = _AsyncCompletions


def system_one_clients(llm: Any, **client_kwargs: Any) -> tuple[SystemOneClient, AsyncSystemOneClient]:
    """A sync and an async engine client on one LlamaIndex LLM (``client_kwargs`` go to both).

    The model name is the LLM's own (``llm.metadata.model_name``) unless ``model=`` is given.
    """
    model = client_kwargs.pop("model", None) or getattr(getattr(llm, "metadata", None), "model_name", None) or "llm"
    return (
        SystemOneClient(LlamaIndexLLMClient(llm), model=model, **client_kwargs),
        AsyncSystemOneClient(AsyncLlamaIndexLLMClient(llm), model=model, **client_kwargs),
    )


# -- ChatResponse -> Chat Completions dict ---------------------------------------------------------


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def _as_dict(obj: Any) -> dict[str, Any] | None:
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    out = dump() if callable(dump) else None
    return out if isinstance(out, dict) else None


def _raw_chat_completion(raw: Any) -> dict[str, Any] | None:
    """``raw`` as a dict when it is a Chat Completion (a first choice with a message), else None."""
    choices = _get(raw, "choices") if raw is not None else None
    if not choices or _get(choices[0], "message") is None:
        return None
    return _as_dict(raw)


class _Entry(TypedDict):
    """One logprob entry of a Chat Completion."""

    token: str
    logprob: float


def recover_sampled(content: str, positions: Sequence[Sequence[LogProb]]) -> list[dict[str, Any]]:
    """Rebuild Chat Completions logprob entries from LlamaIndex's alternatives-only positions.

    At each position the sampled token is the longest alternative that the rest of the reply text
    starts with. When none does, the sampled token fell outside the window: on the last position
    it is the rest of the text, with the window's lowest logprob as its (upper-bound) logprob; in
    the middle its text is unknown, so recovery stops there.
    """
    entries: list[dict[str, Any]] = []
    rest = content
    for i, alts in enumerate(positions):
        window: list[_Entry] = [{"token": a.token, "logprob": a.logprob} for a in alts]
        if not window:
            continue
        matches = [a for a in window if a["token"] and rest.startswith(a["token"])]
        if matches:
            sampled = max(matches, key=lambda a: len(a["token"]))
            rest = rest[len(sampled["token"]):]
        elif i == len(positions) - 1 and rest:
            floor = min((a["logprob"] for a in window if math.isfinite(a["logprob"])), default=-math.inf)
            sampled = _Entry(token=rest, logprob=floor)
            rest = ""
        else:
            break
        entries.append({**sampled, "top_logprobs": window})
    return entries


def chat_response_to_dict(resp: ChatResponse) -> dict[str, Any]:
    """A LlamaIndex ``ChatResponse`` as the Chat Completions dict the engine reads.

    The raw Chat Completion when the integration kept it (lossless: sampled token, finish reason,
    refusal, usage); otherwise content, recovered logprobs and the token counts LlamaIndex reports.
    """
    raw = _raw_chat_completion(resp.raw)
    if raw is not None:
        return raw
    content = resp.message.content
    choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": None}
    if resp.logprobs:
        choice["logprobs"] = {"content": recover_sampled(content or "", resp.logprobs)}
    extra = resp.additional_kwargs or {}
    usage = {k: extra[k] for k in ("prompt_tokens", "completion_tokens", "total_tokens") if isinstance(extra.get(k), int)}
    return {"choices": [choice], "usage": usage or None}
