"""ClientPair: the engine clients one integration calls, sync, async, or both.

A LangChain component or a LlamaIndex selector may be handed a sync client, an async one, or a
framework model that serves both. Async callers without an async client run the sync one on a
worker thread (the caller's context variables go along, so traces nest); sync callers without a
sync client get a :class:`ClientCapabilityError`, since an async HTTP client cannot be driven
from a sync call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from .answers import SystemOneResponse
from .client import AsyncSystemOneClient, SystemOneClient
from .errors import ClientCapabilityError


class ClientPair:
    """``ClientPair(sync, async_, owner="JevGate")``; ``ask``/``aask`` run ``system_one`` on the right one."""

    def __init__(self, sync: SystemOneClient | None = None, async_: AsyncSystemOneClient | None = None, *,
                 owner: str = "this component") -> None:
        if sync is None and async_ is None:
            raise ClientCapabilityError(f"{owner}: pass a client (a SystemOneClient or an AsyncSystemOneClient)")
        if sync is not None and not isinstance(sync, SystemOneClient):
            raise ClientCapabilityError(f"{owner}: sync must be a SystemOneClient, got {type(sync).__name__}")
        if async_ is not None and not isinstance(async_, AsyncSystemOneClient):
            raise ClientCapabilityError(f"{owner}: async_ must be an AsyncSystemOneClient, got {type(async_).__name__}")
        self.sync = sync
        self.async_ = async_
        self.owner = owner

    @classmethod
    def of(cls, client: Any, owner: str = "this component") -> ClientPair | None:
        """The pair for one engine client, or None when ``client`` is not one (the caller tries its own doors)."""
        if isinstance(client, SystemOneClient):
            return cls(client, None, owner=owner)
        if isinstance(client, AsyncSystemOneClient):
            return cls(None, client, owner=owner)
        return None

    @property
    def primary(self) -> SystemOneClient | AsyncSystemOneClient:
        """Either client: both are built alike, so their settings are the pair's."""
        client = self.sync or self.async_
        assert client is not None
        return client

    @property
    def method(self) -> str:
        return self.primary.method

    @property
    def max_concurrency(self) -> int:
        return self.primary.max_concurrency

    @property
    def model(self) -> str:
        return self.primary.model

    def ask(self, state: Any, questions: Mapping[str, Any], **kw: Any) -> SystemOneResponse:
        if self.sync is None:
            raise ClientCapabilityError(
                f"{self.owner} has only an async client (AsyncSystemOneClient), which answers async calls only: "
                "use the async API (ainvoke / aselect / aquery), or pass a SystemOneClient")
        return self.sync.system_one(state, questions, **kw)

    async def aask(self, state: Any, questions: Mapping[str, Any], **kw: Any) -> SystemOneResponse:
        if self.async_ is not None:
            return await self.async_.system_one(state, questions, **kw)
        return await asyncio.to_thread(self.ask, state, questions, **kw)
