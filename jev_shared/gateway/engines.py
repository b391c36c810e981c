"""One engine client per model (and option set), kept for the gateway's life.

The engine learns about its provider as it goes (the surface that answers, the fields the server
refuses) and keeps that on the client, so the gateway must reuse clients across requests rather
than build one per request. Layout, logprob window, question concurrency and per-call timeout are
construction options of the engine, so a request that changes them gets a client of its own
(built once, then reused, a bounded number per model); the default option set is the hot path.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from jev_shared import AsyncSystemOneClient

from .config import Backend, GatewayConfig
from .errors import UnknownModelError
from .schema import EngineOptions

#: Option sets beyond the default kept per model; the least recently used is dropped past this.
MAX_VARIANTS = 16


class EnginePool:
    """``pool.get(model, options)`` -> an ``AsyncSystemOneClient``, reused across requests."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.defaults = EngineOptions(layout=config.layout, max_concurrency=config.max_concurrency,
                                      top_logprobs=config.top_logprobs, timeout_seconds=None)
        self._openai: dict[str, Any] = {}
        self._clients: OrderedDict[tuple[str, EngineOptions], AsyncSystemOneClient] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def models(self) -> list[str]:
        return list(self.config.backends)

    def get(self, model: str, opts: EngineOptions) -> AsyncSystemOneClient:
        backend = self.config.backends.get(model)
        if backend is None:
            raise UnknownModelError(model, self.models)
        key = (model, opts)
        with self._lock:
            client = self._clients.get(key)
            if client is not None:
                self._clients.move_to_end(key)
                return client
            client = self._build(model, backend, opts)
            self._clients[key] = client
            self._evict(model)
            return client

    def _build(self, model: str, backend: Backend, opts: EngineOptions) -> AsyncSystemOneClient:
        """A new engine client; its openai client shares the backend's connection pool."""
        base = self._openai.get(model)
        if base is None:
            import openai

            base = openai.AsyncOpenAI(base_url=backend.base_url, api_key=backend.api_key, max_retries=0)
            self._openai[model] = base
        http = base.with_options(timeout=opts.timeout_seconds) if opts.timeout_seconds else base
        return AsyncSystemOneClient(http, model=backend.model, api=backend.api, method=self.config.method, layout=opts.layout,
                                    max_concurrency=opts.max_concurrency, top_logprobs=opts.top_logprobs,
                                    max_retries=self.config.max_retries)

    def _evict(self, model: str) -> None:
        variants = [k for k in self._clients if k[0] == model and k[1] != self.defaults]
        for key in variants[:-MAX_VARIANTS] if len(variants) > MAX_VARIANTS else []:
            del self._clients[key]

    def warm(self) -> None:
        """Build every model's default client up front, so the first request pays nothing extra."""
        for model in self.models:
            self.get(model, self.defaults)

    async def aclose(self) -> None:
        for client in self._openai.values():
            await client.close()
