"""Resolve what a user hands a selector (engine client, OpenAI-style client, LlamaIndex LLM) to engine clients.

Selectors and the node filter take the same three doors, so the resolution lives in one place.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import Any

from llama_index.core.settings import Settings

from jev_shared import AsyncSystemOneClient, ClientCapabilityError, SystemOneClient, SystemOneResponse

from .llm import system_one_clients


def _is_async_create(client: Any) -> bool:
    """An ``async def create`` (seen through decorators such as the openai SDK's) marks an async client."""
    create = getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)
    return create is not None and inspect.iscoroutinefunction(inspect.unwrap(create))


def resolve_clients(
    client: Any = None,
    *,
    async_client: Any = None,
    llm: Any = None,
    model: str | None = None,
    **client_kwargs: Any,
) -> tuple[SystemOneClient | None, AsyncSystemOneClient | None]:
    """(sync, async) engine clients from whichever door the user used.

    ``client`` / ``async_client``: a ``SystemOneClient`` / ``AsyncSystemOneClient``, or any
    OpenAI-compatible client (then ``model`` is required); ``client`` counts as async when its
    ``create`` is an ``async def``, ``async_client`` always does.
    ``llm``: a LlamaIndex LLM, serving both. Nothing at all: ``Settings.llm``, as LlamaIndex's
    own selectors do.
    """
    if llm is not None and (client is not None or async_client is not None):
        raise ValueError("pass either llm= or client=/async_client=, not both")
    if llm is None and client is None and async_client is None:
        llm = Settings.llm
    if llm is not None:
        if model is not None:
            client_kwargs["model"] = model
        return system_one_clients(llm, **client_kwargs)
    sync, async_ = None, None
    for given, is_async in ((client, _is_async_create(client)), (async_client, True)):
        if given is None:
            continue
        if isinstance(given, SystemOneClient):
            sync = given
        elif isinstance(given, AsyncSystemOneClient):
            async_ = given
        elif model is None:
            raise ValueError(f"model: a model name is required to wrap a {type(given).__name__} client")
        elif is_async:
            async_ = AsyncSystemOneClient(given, model=model, **client_kwargs)
        else:
            sync = SystemOneClient(given, model=model, **client_kwargs)
    return sync, async_


class Asker:
    """Runs ``system_one`` on whichever engine client there is, sync or async.

    Async callers without an async client run the sync one in a worker thread. Sync callers
    without a sync client get a clear error: an async HTTP client cannot be reused across event loops.
    """

    def __init__(self, sync: SystemOneClient | None, async_: AsyncSystemOneClient | None, owner: str) -> None:
        if sync is None and async_ is None:
            raise ValueError(f"{owner}: pass a client (client=, async_client= or llm=)")
        self.sync = sync
        self.async_ = async_
        self.owner = owner

    def ask(self, state: Any, questions: Mapping[str, Any], **kw: Any) -> SystemOneResponse:
        if self.sync is None:
            raise ClientCapabilityError(
                f"{self.owner} has only an async client; use the async API (aselect / aquery / aretrieve) "
                "or pass a sync client as client="
            )
        return self.sync.system_one(state, questions, **kw)

    async def aask(self, state: Any, questions: Mapping[str, Any], **kw: Any) -> SystemOneResponse:
        if self.async_ is not None:
            return await self.async_.system_one(state, questions, **kw)
        return await asyncio.to_thread(self.ask, state, questions, **kw)

    @property
    def method(self) -> str:
        """The client's configured readout method (both clients are built alike)."""
        client = self.sync or self.async_
        assert client is not None
        return client.method
