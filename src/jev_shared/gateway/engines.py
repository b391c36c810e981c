"""One engine client and one memory per model, kept for the gateway's life.

The engine learns about its backend as it goes (the surface that answers, the fields the server
refuses, whether it returns logprobs, debias priors) and keeps that in a :class:`~jev_shared.Memory`;
layout, logprob window and question concurrency are per-call options of the engine, so every
request of a model is served by the same client and teaches the same memory. The memory is the
per-user cache (``Memory.user_cache()``) unless the gateway runs with ``--no-cache``, so a
restarted gateway asks nothing it already knows.

The one thing the engine takes only at construction is the HTTP client's per-attempt timeout; a
request that sets ``backend.timeout_seconds`` is served by a twin of the model's client (the same
memory and connection pool, a bounded number of them).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from jev_shared import AsyncSystemOneClient, Memory, Preparation
from jev_shared.calibration import Calibrator

from .config import Backend, GatewayConfig
from .errors import UnknownModelError
from .schema import EngineOptions

#: Twins for per-attempt timeouts kept per model; the least recently used is dropped past this.
MAX_TIMEOUT_TWINS = 4


class EnginePool:
    """``pool.get(model)`` -> the model's ``AsyncSystemOneClient``; ``pool.get(model, 5.0)`` its 5 s twin."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.defaults = EngineOptions(layout=config.layout, max_concurrency=config.max_concurrency,
                                      top_logprobs=config.top_logprobs, timeout_seconds=None)
        self.memory = Memory.user_cache() if config.cache else Memory()
        self._openai: dict[str, Any] = {}
        #: what the engine posts each backend's requests with, where it is not the SDK's client (to close)
        self._posts: list[Any] = []
        self._clients: OrderedDict[tuple[str, float | None], AsyncSystemOneClient] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def models(self) -> list[str]:
        return list(self.config.backends)

    @property
    def n_clients(self) -> int:
        """Engine clients built so far (one per model, plus per-attempt-timeout twins)."""
        return len(self._clients)

    def get(self, model: str, timeout_s: float | None = None) -> AsyncSystemOneClient:
        backend = self.config.backends.get(model)
        if backend is None:
            raise UnknownModelError(model, self.models)
        key = (model, timeout_s)
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                client = self._clients[key] = self._build(model, backend, timeout_s)
                self._evict(model)
            self._clients.move_to_end(key)
            return client

    def _build(self, model: str, backend: Backend, timeout_s: float | None) -> AsyncSystemOneClient:
        """A new engine client; its openai client shares the backend's connection pool, and the memory."""
        base = self._openai.get(model)
        if base is None:
            base, posts = backend.sdk_client()
            self._openai[model] = base
            if posts is not None:
                self._posts.append(posts)
        # a copy keeps its Backend (backend.py) and its HTTP client; the direct post takes the copy's timeout
        http = base.with_options(timeout=timeout_s) if timeout_s else base
        cal = self.config.calibration  # --calibration's calibrator, else the engine's default (the shipped one)
        calibrator: Calibrator | str = cal.calibrator if cal is not None and cal.calibrator is not None else "auto"
        return AsyncSystemOneClient(http, model=backend.model, api=backend.api, method=self.config.method,
                                    layout=self.config.layout, max_concurrency=self.config.max_concurrency,
                                    top_logprobs=self.config.top_logprobs, max_retries=self.config.max_retries,
                                    memory=self.memory, calibrator=calibrator, order=self.config.order)

    def _evict(self, model: str) -> None:
        twins = [k for k in self._clients if k[0] == model and k[1] is not None]
        for key in twins[:-MAX_TIMEOUT_TWINS] if len(twins) > MAX_TIMEOUT_TWINS else []:
            del self._clients[key]

    def warm(self) -> None:
        """Build every model's client up front, so the first request pays nothing extra."""
        for model in self.models:
            self.get(model)

    async def prepare(self, questions: dict[str, Any]) -> dict[str, Preparation]:
        """Every one-time cost of ``questions`` paid now, for each model (``jev serve --warm``)."""
        return {model: await self.get(model).aprepare(questions, layout=self.config.layout)
                for model in self.models}

    async def aclose(self) -> None:
        """Close every model's openai client, and with it the HTTP client it was built over, and the one the engine
        posts with where that is another (the gateway's aiohttp session: ``config.backend_posts``)."""
        for client in self._openai.values():
            await client.close()
        for posts in self._posts:
            await posts.aclose()
