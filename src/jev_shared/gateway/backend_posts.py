"""The gateway's posts to its backends over one aiohttp session: the HTTP client ``direct.apost`` uses.

The engine posts a route's JSON body with whatever HTTP client its :class:`~jev_shared.direct.HttpTarget` holds,
through that client's ``post(url, content=, headers=, params=, timeout=)`` and the reply's ``status_code``,
``is_success``, ``content``, ``text``, ``headers``. The SDK's own aiohttp client (``openai.DefaultAioHttpClient``)
wraps aiohttp in httpx2's request and response models, which cost about as much as aiohttp itself:
per post, 1.07 M instructions through it against 0.46 M for the same post on a plain ``aiohttp.ClientSession``
(``python -m bench post_instructions``). :class:`AiohttpPosts` is that plain session behind the same few names: no HTTP of
our own, aiohttp sends and reads. The SDK client beside it keeps its httpx client for anything the engine does not
post directly. An aiohttp session belongs for good to the event loop it was opened on; a gateway worker has one.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp


@dataclass(frozen=True)
class Reply:
    """A backend's whole reply, read: what ``direct.apost`` and ``direct.StatusFault`` read of httpx's ``Response``."""

    status_code: int
    content: bytes
    headers: Mapping[str, str]

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    async def aread(self) -> bytes:
        return self.content


def _timeout(value: Any) -> aiohttp.ClientTimeout:
    """httpx's timeout (seconds, or a ``Timeout`` with ``connect``/``read``/``pool``) as aiohttp's: connecting,
    each read, and waiting for a connection from the pool, as httpx bounds them (aiohttp has no write timeout)."""
    if value is None or isinstance(value, (int, float)):
        return aiohttp.ClientTimeout(total=None, sock_connect=value, sock_read=value, connect=value)
    return aiohttp.ClientTimeout(total=None, sock_connect=value.connect, sock_read=value.read, connect=value.pool)


class AiohttpPosts:
    """``post`` and ``aclose`` over one lazily opened ``aiohttp.ClientSession`` (opened on the first post, inside
    the running loop), sending ``headers`` (the SDK's httpx client's own: user agent, accepted encodings) and then
    each request's, in the order httpx sends them."""

    def __init__(self, headers: Mapping[str, str] | None = None, max_connections: int = 100) -> None:
        self.headers = dict(headers or {})
        self._limit = max_connections
        self._session: aiohttp.ClientSession | None = None

    @property
    def is_closed(self) -> bool:
        return self._session is not None and self._session.closed

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            # proxies from the environment (HTTP_PROXY, NO_PROXY, …) as httpx reads them; read only where some are
            # set (aiohttp reads the environment again on every request when asked to)
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=self._limit),
                                                  trust_env=bool(urllib.request.getproxies()))
        return self._session

    async def post(self, url: Any, *, content: bytes, headers: Mapping[str, str], params: Any = None,
                   timeout: Any = None) -> Reply:
        given = {name.lower() for name in headers}  # as httpx merges: a request's header replaces the default's
        sent = {**{k: v for k, v in self.headers.items() if k.lower() not in given}, **headers}
        async with self._open().post(str(url), data=content, headers=sent, params=params, allow_redirects=False,
                                     timeout=_timeout(timeout)) as response:
            return Reply(response.status, await response.read(), response.headers)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


__all__ = ["AiohttpPosts", "Reply"]
