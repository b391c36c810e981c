"""The gateway's HTTP/1.1 client transport toward its backend: keep-alive connections, responses parsed by httptools.

The openai SDK sends through an httpx client, and its default transport (httpcore, h11: pure Python)
was a third of the gateway's CPU per backend call (``bench/gateway_cpu.py``). This transport is the
SDK's documented extension point (``openai.DefaultAsyncHttpxClient(transport=...)``): the SDK still
builds every request (auth, base URL, headers, timeouts) and reads every response (status errors,
``Retry-After``); only the bytes on the wire go through here. Plain ``http://`` over asyncio with the
``httptools`` parser uvicorn already uses; ``https://`` (and anything else) goes to httpx's own
transport. Errors are httpx's (``ConnectError``, ``ReadTimeout``, ``RemoteProtocolError``...), which
the SDK turns into its own ``APIConnectionError`` / ``APITimeoutError`` as before.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

import httptools
import openai


def _sdk_httpx() -> Any:
    """The httpx the SDK's client is built on: ``httpx2`` under openai 3.x, ``httpx`` under 2.x."""
    names = (c.__module__.split(".")[0] for c in openai.DefaultAsyncHttpxClient.__mro__)
    return importlib.import_module(next((n for n in names if n in ("httpx2", "httpx")), "httpx"))


httpx = _sdk_httpx()
_AsyncBaseTransport: Any = httpx.AsyncBaseTransport  # the module is chosen at run time: typed as Any

#: Idle keep-alive connections kept per backend host; more are closed when they come back.
MAX_IDLE = 256


class _Connection(asyncio.Protocol):
    """One keep-alive connection: a request written, its response parsed as it arrives."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.waiter: asyncio.Future[None] | None = None
        self.started = False  # a byte of the current response has arrived
        self._reset()

    def _reset(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.headers: list[tuple[bytes, bytes]] = []
        self.body: list[bytes] = []
        self.done = False
        self.started = False
        self.headers_done = False
        self.keep_alive = False

    # asyncio.Protocol
    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.started = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"the backend's response is not HTTP/1.1: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.done:
            return
        if self.headers_done and not any(k.lower() in (b"content-length", b"transfer-encoding")
                                         for k, _ in self.headers):
            self.on_message_complete()  # a body without a length ends with the connection
        else:
            self._fail(httpx.RemoteProtocolError("the backend closed the connection without a complete response"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        self.done = True
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            try:
                self.transport.close()
            except RuntimeError:  # its event loop is already closed: nothing is left to release
                pass

    async def exchange(self, data: bytes, read_timeout: float | None) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """Send one request; its status, headers and body (ReadTimeout past ``read_timeout``)."""
        loop = asyncio.get_running_loop()
        self._reset()
        self.waiter = waiter = loop.create_future()
        self.transport.write(data)  # type: ignore[union-attr]
        timer = loop.call_later(read_timeout, self._timed_out, waiter) if read_timeout is not None else None
        try:
            await waiter
        finally:
            if timer is not None:
                timer.cancel()
            self.waiter = None
        return self.parser.get_status_code(), self.headers, b"".join(self.body)

    def _timed_out(self, waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(httpx.ReadTimeout("the backend did not answer in time"))
        self.close()

    @property
    def reusable(self) -> bool:
        return not self.closed and self.done and self.keep_alive


class LeanTransport(_AsyncBaseTransport):
    """``httpx.AsyncClient(transport=LeanTransport())``: HTTP/1.1 keep-alive over asyncio; https falls back."""

    def __init__(self, fallback: Any = None) -> None:
        self._idle: dict[tuple[str, int], list[_Connection]] = {}
        self._fallback = fallback
        self._closed = False

    async def handle_async_request(self, request: Any) -> Any:
        url = request.url
        if url.scheme != "http":
            return await self._fallback_transport().handle_async_request(request)
        timeout = request.extensions.get("timeout") or {}
        key = (url.host, url.port or 80)
        data = _head(request) + await request.aread()
        conn = self._checkout(key)
        if conn is not None:
            try:
                return self._answer(key, conn, request, await conn.exchange(data, timeout.get("read")))
            except httpx.RemoteProtocolError:
                if conn.started:
                    raise
                # a kept-alive connection the backend had closed: the request never reached it; once more, fresh
            except BaseException:
                conn.close()
                raise
        conn = await self._connect(key, timeout.get("connect"))
        try:
            return self._answer(key, conn, request, await conn.exchange(data, timeout.get("read")))
        except BaseException:
            conn.close()
            raise

    def _answer(self, key: tuple[str, int], conn: _Connection, request: Any,
                got: tuple[int, list[tuple[bytes, bytes]], bytes]) -> Any:
        self._checkin(key, conn)
        return httpx.Response(got[0], headers=got[1], content=got[2], request=request)

    def _checkout(self, key: tuple[str, int]) -> _Connection | None:
        idle = self._idle.get(key)
        while idle:
            conn = idle.pop()
            if not conn.closed:
                return conn
        return None

    def _checkin(self, key: tuple[str, int], conn: _Connection) -> None:
        idle = self._idle.setdefault(key, [])
        if conn.reusable and not self._closed and len(idle) < MAX_IDLE:
            idle.append(conn)
        else:
            conn.close()

    async def _connect(self, key: tuple[str, int], timeout_s: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, conn = await asyncio.wait_for(loop.create_connection(_Connection, key[0], key[1]), timeout_s)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"could not connect to {key[0]}:{key[1]} in time") from None
        except OSError as exc:
            raise httpx.ConnectError(f"could not connect to {key[0]}:{key[1]}: {exc}") from None
        return conn

    def _fallback_transport(self) -> Any:
        if self._fallback is None:
            self._fallback = httpx.AsyncHTTPTransport()
        return self._fallback

    async def aclose(self) -> None:
        self._closed = True
        for idle in self._idle.values():
            for conn in idle:
                conn.close()
        self._idle.clear()
        if self._fallback is not None:
            await self._fallback.aclose()


def _head(request: Any) -> bytes:
    """The request line and headers (httpx has set Host and Content-Length)."""
    target = request.url.raw_path or b"/"
    lines = [b"%s %s HTTP/1.1" % (request.method.encode("ascii"), target)]
    lines += [b"%s: %s" % (k, v) for k, v in request.headers.raw]
    return b"\r\n".join(lines) + b"\r\n\r\n"
