"""The real SDK clients over an in-process transport: every request goes the path a user's takes.

``provider(handler)`` is an ``openai.OpenAI`` whose HTTP client is the SDK's own http package
(``httpx`` under openai 2.x, ``httpx2`` under 3.x) on a ``MockTransport``: the SDK builds, sends
and parses real HTTP, and ``handler`` answers each :class:`~tests.helpers.wire.Request`. Every
request is recorded on ``client.wire`` (method, path, headers, parsed JSON body), with the peak of
requests in flight at once.

    client = provider(windows({"A": -0.1, "B": -3.0}))
    SystemOneClient(client, model="m").system_one(...)
    client.wire[0]["messages"]            # the first request's body, as sent

The client says it speaks Chat Completions only (``Backend.surfaces``, as ``LocalServer.client()``
does), so ``api="auto"`` asks no Responses route first; pass ``surfaces=None`` to let the engine
find out for itself.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import openai

from jev_shared.backend import describe

from .replies import in_turn
from .wire import Handler, Hang, Reply, Request, Reset, act

BASE = "http://provider.test"
CHAT_ONLY = ("chat_completions",)


def api_key() -> str:
    """Built at run time: no key-shaped literal in the source."""
    return "test-" + "k" * 8


class Wire(list):
    """The requests a client sent, in order (a list of :class:`Request`), and how many were in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.active = 0
        self.peak = 0
        self._lock = threading.Lock()

    @property
    def bodies(self) -> list[Any]:
        return [r.body for r in self]

    @property
    def paths(self) -> list[str]:
        return [r.path for r in self]

    def enter(self, req: Request) -> None:
        with self._lock:
            self.append(req)
            self.active += 1
            self.peak = max(self.peak, self.active)

    def leave(self) -> None:
        with self._lock:
            self.active -= 1


def http_of(sdk: ModuleType) -> ModuleType:
    """The http package the SDK builds its client on (openai 3.x and anthropic: httpx2; openai 2.x: httpx)."""
    import importlib

    for cls in sdk.DefaultHttpxClient.__mro__[1:]:
        if cls.__module__.startswith("httpx"):
            return importlib.import_module(cls.__module__.split(".")[0])
    raise RuntimeError(f"{sdk.__name__} builds on no httpx package")


def _response(http: ModuleType, action: Any, request: Any) -> Any:
    if isinstance(action, Reset):
        raise http.ConnectError("connection reset by the test provider", request=request)
    if isinstance(action, Hang):
        raise http.ReadTimeout("the test provider hung", request=request)
    assert isinstance(action, Reply)
    return http.Response(action.status, headers=action.headers, content=action.body)


def _handler(handler: Handler | Any) -> Handler:
    return handler if callable(handler) else in_turn(handler)


def transport(http: ModuleType, handler: Handler | Any, wire: Wire, *, delay: float = 0.0,
              is_async: bool = False) -> Any:
    """A ``MockTransport`` answering with ``handler`` (a function of the request, or one fixed body)."""
    handle = _handler(handler)

    def request_of(request: Any) -> Request:
        return Request.of(request.method, request.url.path, request.headers, request.read())

    if is_async:
        async def answer_async(request: Any) -> Any:
            req = request_of(request)
            wire.enter(req)
            try:
                if delay:
                    await asyncio.sleep(delay)
                return _response(http, act(handle, req), request)
            finally:
                wire.leave()

        return http.MockTransport(answer_async)

    def answer(request: Any) -> Any:
        req = request_of(request)
        wire.enter(req)
        try:
            if delay:
                time.sleep(delay)
            return _response(http, act(handle, req), request)
        finally:
            wire.leave()

    return http.MockTransport(answer)


def http_client(handler: Handler | Any, *, is_async: bool = False, sdk: ModuleType = openai) -> Any:
    """The SDK's own http client over the in-process transport, for a framework that builds the SDK client
    itself (``ChatOpenAI(http_client=...)``); its requests are recorded on ``.wire``."""
    http = http_of(sdk)
    wire = Wire()
    client = (http.AsyncClient if is_async else http.Client)(
        transport=transport(http, handler, wire, is_async=is_async))
    client.wire = wire
    return client


def _sdk_client(cls: type, sdk: ModuleType, handler: Handler | Any, base_url: str, *, delay: float, is_async: bool,
                surfaces: Sequence[str] | None, attrs: dict[str, Any], key: str | None) -> Any:
    http = http_of(sdk)
    wire = Wire()
    http_client_ = (http.AsyncClient if is_async else http.Client)(
        transport=transport(http, handler, wire, delay=delay, is_async=is_async))
    client = cls(base_url=base_url, api_key=key or api_key(), max_retries=0, http_client=http_client_)
    client.wire = wire
    fields = {BACKEND_FIELDS.get(name, name): value for name, value in attrs.items()}
    if surfaces is not None:
        fields["surfaces"] = tuple(surfaces)
    return describe(client, **fields) if fields else client  # what LocalServer.client() attaches (backend.py)


#: the helpers' older keywords for Backend fields
BACKEND_FIELDS = {"jev_tokenize": "tokenize", "jev_slots": "slots", "jev_exact_readout": "exact_readout",
                  "jev_debias_zero_shot": "debias", "jev_user_cache": "user_cache", "jev_backend": "name"}


def provider(handler: Handler | Any, *, delay: float = 0.0, surfaces: Sequence[str] | None = CHAT_ONLY,
             key: str | None = None, base_url: str = BASE + "/v1", **attrs: Any) -> openai.OpenAI:
    """A real ``openai.OpenAI`` whose requests ``handler`` answers; they are recorded on ``.wire``.

    ``base_url`` only names the backend (a memory is keyed by it): nothing leaves the process."""
    return _sdk_client(openai.OpenAI, openai, handler, base_url, delay=delay, is_async=False,
                       surfaces=surfaces, attrs=attrs, key=key)


def aprovider(handler: Handler | Any, *, delay: float = 0.0, surfaces: Sequence[str] | None = CHAT_ONLY,
              key: str | None = None, base_url: str = BASE + "/v1", **attrs: Any) -> openai.AsyncOpenAI:
    """The async twin: a real ``openai.AsyncOpenAI`` (``delay`` awaits, so requests overlap)."""
    return _sdk_client(openai.AsyncOpenAI, openai, handler, base_url, delay=delay, is_async=True,
                       surfaces=surfaces, attrs=attrs, key=key)


def anthropic_provider(handler: Handler | Any, *, is_async: bool = False, key: str | None = None,
                       **attrs: Any) -> Any:
    """A real ``anthropic.Anthropic`` (or ``AsyncAnthropic``) whose ``/v1/messages`` ``handler`` answers."""
    import anthropic  # a dev dependency only: the benches that import these helpers need not have it

    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    return _sdk_client(cls, anthropic, handler, BASE, delay=0.0, is_async=is_async, surfaces=None, attrs=attrs,
                       key=key)
