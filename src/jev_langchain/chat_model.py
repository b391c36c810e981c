"""The user's own LangChain chat model as the engine's backend.

The engine talks to anything with ``chat.completions.create(**kwargs)``. :class:`ChatModelClient`
gives a LangChain chat model that shape: the engine's request fields become ``invoke`` keyword
arguments, and the returned ``AIMessage`` becomes a Chat Completions dict, with the logprobs read
from ``response_metadata["logprobs"]``. A model that returns no logprobs leaves the engine's
``method="auto"`` to fall back to its JSON methods.

The model is called with no explicit config, so LangChain's own context (set by the router, gate
or guard around each decision) nests the model's run under the decision's run in a trace.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from types import SimpleNamespace
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.configurable import DynamicRunnable

from jev_shared import AsyncSystemOneClient, SystemOneClient

log = logging.getLogger("jev_langchain")

#: The request fields the engine may send, beyond ``model`` and ``messages``.
ENGINE_FIELDS = ("temperature", "max_tokens", "logprobs", "top_logprobs", "response_format", "extra_body",
                 "reasoning_effort")
#: Provider stop reasons that mean the output was cut off, mapped onto Chat Completions' words.
_FINISH = {"max_tokens": "length", "MAX_TOKENS": "length", "end_turn": "stop", "STOP": "stop",
           "stop_sequence": "stop"}


def chat_models_of(obj: Any) -> list[BaseChatModel] | None:
    """The chat models ``obj`` runs: itself, or those inside LangChain's wrappers, else None.

    ``.bind(...)``, ``.with_config(...)`` and ``.with_retry()`` wrap one model (``bound``);
    ``.configurable_fields(...)`` / ``.configurable_alternatives(...)`` run their ``default``
    unless a config says otherwise; ``.with_fallbacks([...])`` runs the primary, then each
    fallback (all must be chat models). The wrapper itself is what gets invoked, so its retries
    and fallbacks apply to every decision.
    """
    if isinstance(obj, BaseChatModel):
        return [obj]
    if isinstance(obj, RunnableBindingBase):
        return chat_models_of(obj.bound)
    if isinstance(obj, DynamicRunnable):
        return chat_models_of(obj.default)
    if isinstance(obj, RunnableWithFallbacks):
        found = [chat_models_of(r) for r in (obj.runnable, *obj.fallbacks)]
        return None if any(f is None for f in found) else [m for f in found if f for m in f]
    return None


def chat_model_of(obj: Any) -> BaseChatModel | None:
    """The chat model behind ``obj`` (itself, or the primary model of a wrapper: :func:`chat_models_of`)."""
    models = chat_models_of(obj)
    return models[0] if models else None


def default_forward(model: BaseChatModel) -> frozenset[str]:
    """The engine fields a model takes as ``invoke`` kwargs: those it declares as its own fields.

    LangChain chat models accept their own parameters per call; an unknown one may reach the
    provider (which refuses it) or break the integration, so only declared ones are sent. The
    OpenAI family (it declares ``logprobs``) also takes ``response_format`` per call, but not
    ``logprobs`` once it is set to the Responses API.
    """
    fields = set(type(model).model_fields)
    forward = {name for name in ENGINE_FIELDS if name in fields}
    if {"logprobs", "top_logprobs"} <= fields:
        forward.add("response_format")
    if uses_responses_api(model):
        forward -= {"logprobs", "top_logprobs"}  # Responses.create() takes neither; the engine falls back to JSON
    return frozenset(forward)


def uses_responses_api(model: BaseChatModel) -> bool:
    """True for an OpenAI-family model set to OpenAI's Responses API (``use_responses_api=True``)."""
    return getattr(model, "use_responses_api", None) is True or getattr(model, "output_version", None) == "responses/v1"


def fills_schema_by_body(model: BaseChatModel) -> bool:
    """True for a Responses-API model on a server other than OpenAI's (llama.cpp, vLLM, ollama, ...).

    llama.cpp's ``/v1/responses`` ignores ``text.format``: asked for a JSON schema, a model writes
    free text (or the schema itself), which the engine could only report as malformed. It honours
    the schema as a body field, ``json_schema``, as its Chat Completions route does; OpenAI's own
    API honours ``text.format`` and refuses unknown body fields, so it is sent only elsewhere.
    """
    base = getattr(model, "openai_api_base", None) or ""
    return uses_responses_api(model) and bool(base) and "api.openai.com" not in base


def _schema_of(response_format: Any) -> Any:
    """The JSON schema inside a Chat Completions ``response_format``, else None."""
    if isinstance(response_format, Mapping) and response_format.get("type") == "json_schema":
        spec = response_format.get("json_schema")
        return spec.get("schema") if isinstance(spec, Mapping) else None
    return None


def model_name(model: BaseChatModel) -> str:
    """The model's name as its integration reports it, for the engine's ``model``."""
    for attr in ("model_name", "model", "model_id"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return model._llm_type


def completion_dict(message: BaseMessage) -> dict[str, Any]:
    """An ``AIMessage`` as the Chat Completions dict the engine reads."""
    meta = message.response_metadata or {}
    content = message.content if isinstance(message.content, str) else message.text
    body: dict[str, Any] = {"role": "assistant", "content": content,
                            "refusal": message.additional_kwargs.get("refusal")}
    reasoning = message.additional_kwargs.get("reasoning_content")
    if isinstance(reasoning, str):
        body["reasoning_content"] = reasoning
    logprobs = meta.get("logprobs")
    if isinstance(logprobs, list):  # some integrations return the entries alone
        logprobs = {"content": logprobs}
    finish = meta.get("finish_reason") or meta.get("stop_reason")
    usage = getattr(message, "usage_metadata", None) or {}
    return {
        "choices": [{"index": 0, "message": body, "finish_reason": _FINISH.get(str(finish), finish), "logprobs": logprobs}],
        "usage": {"prompt_tokens": usage.get("input_tokens"), "completion_tokens": usage.get("output_tokens")},
    }


class ChatModelClient:
    """``chat.completions.create(**kwargs)`` over a LangChain chat model, for :class:`SystemOneClient`.

    ``forward`` names the engine fields passed to ``model.invoke`` (default: :func:`default_forward`;
    for a wrapper with fallbacks, the fields every one of its models takes); the rest are dropped, so a
    model that cannot take ``logprobs`` is simply asked without them. ``model`` may be a chat model
    wrapped by ``.bind``, ``.with_retry``, ``.with_fallbacks`` or ``.configurable_fields``.
    """

    def __init__(self, model: Any, *, forward: Collection[str] | None = None) -> None:
        models = chat_models_of(model)
        if not models:
            raise TypeError(f"model: expected a LangChain chat model (BaseChatModel, or one wrapped by .bind, "
                            f".with_retry, .with_fallbacks or .configurable_fields), got {type(model).__name__}")
        base = models[0]
        if forward is not None and (isinstance(forward, str) or not all(isinstance(f, str) for f in forward)):
            raise TypeError(f"forward: expected a collection of field names, got {forward!r}")
        self.model = model
        self.base = base
        self.forward = (frozenset(forward) if forward is not None
                        else frozenset.intersection(*(default_forward(m) for m in models)))
        self.fills_by_body = fills_schema_by_body(base)
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def _request(self, kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Split the engine's kwargs into the messages and the ``invoke`` kwargs."""
        sent = {k: v for k, v in kwargs.items() if k in self.forward}
        dropped = sorted(set(kwargs) - set(sent) - {"model", "messages"})
        if dropped:
            log.debug("jev_langchain: %s does not take %s; sent without", type(self.base).__name__, dropped)
        own_extra = getattr(self.base, "extra_body", None)
        if "extra_body" in sent and isinstance(own_extra, Mapping):
            sent["extra_body"] = {**own_extra, **sent["extra_body"]}  # the model's own extra_body stays
        schema = _schema_of(kwargs.get("response_format"))
        if schema is not None and self.fills_by_body:
            extra = sent.get("extra_body") or (own_extra if isinstance(own_extra, Mapping) else {})
            sent["extra_body"] = {**extra, "json_schema": schema}
        return list(kwargs["messages"]), sent

    def create(self, **kwargs: Any) -> dict[str, Any]:
        messages, invoke_kwargs = self._request(kwargs)
        return completion_dict(self.model.invoke(messages, **invoke_kwargs))


class AsyncChatModelClient(ChatModelClient):
    """The async twin of :class:`ChatModelClient`, for :class:`AsyncSystemOneClient`."""

    async def create(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        messages, invoke_kwargs = self._request(kwargs)
        return completion_dict(await self.model.ainvoke(messages, **invoke_kwargs))


def jev_client_from_chat_model(model: Any, *, forward: Collection[str] | None = None,
                               **client_kwargs: Any) -> SystemOneClient:
    """A :class:`SystemOneClient` that asks ``model`` (e.g. ``ChatOpenAI(logprobs=True)``).

    ``client_kwargs`` go to :class:`SystemOneClient` (``method``, ``mode``, ...); ``model`` defaults
    to the chat model's own name.
    """
    adapter = ChatModelClient(model, forward=forward)
    client_kwargs.setdefault("model", model_name(adapter.base))
    return SystemOneClient(adapter, **client_kwargs)


def jev_async_client_from_chat_model(model: Any, *, forward: Collection[str] | None = None,
                                     **client_kwargs: Any) -> AsyncSystemOneClient:
    """The async twin of :func:`jev_client_from_chat_model` (the model's ``ainvoke``)."""
    adapter = AsyncChatModelClient(model, forward=forward)
    client_kwargs.setdefault("model", model_name(adapter.base))
    return AsyncSystemOneClient(adapter, **client_kwargs)


__all__ = [
    "ChatModelClient", "AsyncChatModelClient", "jev_client_from_chat_model", "jev_async_client_from_chat_model",
    "chat_model_of", "chat_models_of", "default_forward", "completion_dict", "fills_schema_by_body", "ENGINE_FIELDS",
]
