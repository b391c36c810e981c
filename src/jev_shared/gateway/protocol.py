"""uvicorn's HTTP protocol with the slow-client bounds it lacks: a header read timeout, a body read
timeout, and a connection limit, each answered in the gateway's own error shape.

uvicorn bounds only idle keep-alive connections; a client that trickles its headers or its body a
byte at a time holds a connection (and, once its headers are in, a request slot) for as long as it
likes. Here a request's head must arrive within ``header_timeout_s`` of its first byte (or of the
connection opening), its body within ``body_timeout_s`` of its head; past either the client gets a
408 and the connection is closed. A connection past ``max_connections`` gets a 503 and is closed at
once, before it can send anything; so does one past ``max_connections_per_client`` from one client
address (:class:`PerClientLimit`, a plain ``asyncio.Protocol`` in front of uvicorn's, by composition),
so one client re-opening slow connections cannot take every slot.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .config import GatewayConfig
from .errors import ERRORS

_REASONS = {400: b"Bad Request", 408: b"Request Timeout", 503: b"Service Unavailable"}


def raw_error(kind: str, message: str) -> bytes:
    """A complete HTTP/1.1 error response of ``kind`` (its status from the error table), written straight
    to the socket (no app is running)."""
    status = ERRORS[kind].status
    body = json.dumps({"error": {"type": kind, "message": message}}).encode()
    head = (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n"
            % (status, _REASONS[status], len(body)))
    if status == 503:
        head += b"retry-after: 1\r\n"
    return head + b"\r\n" + body


class GuardedProtocol(HttpToolsProtocol):
    """HttpToolsProtocol plus the bounds; :func:`guarded_protocol` makes one per config."""

    limits: GatewayConfig
    #: Called with the error type of each connection the protocol refuses itself (the app's metrics).
    on_refuse: Any = None

    def connection_made(self, transport: Any) -> None:
        self._timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)
        if len(self.connections) > self.limits.max_connections:
            self._refuse("too_many_connections",
                         f"the gateway has {self.limits.max_connections} connections open, its limit")
            return
        self._arm(self.limits.header_timeout_s, "header")

    def send_400_response(self, msg: str) -> None:
        """A request uvicorn cannot parse as HTTP: the gateway's error shape, not uvicorn's plain text."""
        self._refuse("bad_request", msg)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._timer is None:  # a new request on a kept-alive connection (the first one is armed already)
            self._arm(self.limits.header_timeout_s, "header")

    def on_headers_complete(self) -> None:
        self._arm(self.limits.body_timeout_s, "body")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float, what: str) -> None:
        self._disarm()
        self._timer = self.loop.call_later(seconds, self._expired, seconds, what)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expired(self, seconds: float, what: str) -> None:
        self._timer = None
        cycle = self.cycle  # the request being read (body), or the one before it (head of the next)
        answer = (cycle is None or cycle.response_complete) if what == "header" else not cycle.response_started
        self._refuse("request_timeout", f"the request's {what} did not arrive within {seconds:g} s "
                                         f"(--{what}-timeout)", answer=answer)

    def _refuse(self, kind: str, message: str, answer: bool = True) -> None:
        """Answer (unless a response is under way) and close; the app, if reading, sees a disconnect."""
        if self.transport.is_closing():
            return
        if self.on_refuse is not None:
            self.on_refuse(kind)
        if answer:
            self.transport.write(raw_error(kind, message))
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.close()


class PerClientLimit(asyncio.Protocol):
    """At most ``limit`` open connections from one client address (IP): one more is answered 503
    ``too_many_connections`` and closed before the HTTP protocol behind (``inner``) sees it. Each
    config makes its own subclass (:func:`per_client`) holding the count of its server's connections."""

    inner: Any
    limit: int
    open: Counter[str]
    on_refuse: Any = None

    def __init__(self, **kw: Any) -> None:
        self.protocol: Any = self.inner(**kw)  # uvicorn's arguments (config, server_state, ...), passed on
        self.peer: str | None = None
        self.refused = False

    def connection_made(self, transport: Any) -> None:
        peer = transport.get_extra_info("peername")
        address = peer[0] if isinstance(peer, tuple) and peer else None  # a unix socket has none: no cap
        if address is not None and self.open[address] >= self.limit:
            self.refused = True
            if self.on_refuse is not None:
                self.on_refuse("too_many_connections")
            transport.write(raw_error("too_many_connections", f"this client has {self.limit} connections "
                                                              "open, its limit (--max-connections-per-client)"))
            transport.close()
            return
        if address is not None:
            self.peer = address
            self.open[address] += 1
        self.protocol.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None:
            self.open[self.peer] -= 1
            if not self.open[self.peer]:
                del self.open[self.peer]
            self.peer = None
        if not self.refused:
            self.protocol.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if not self.refused:
            self.protocol.data_received(data)

    def eof_received(self) -> bool | None:
        return None if self.refused else self.protocol.eof_received()

    def pause_writing(self) -> None:
        if not self.refused:
            self.protocol.pause_writing()

    def resume_writing(self) -> None:
        if not self.refused:
            self.protocol.resume_writing()


def per_client(inner: type[Any], limit: int, on_refuse: Any = None) -> type[PerClientLimit]:
    """``inner`` (a protocol class uvicorn builds) behind a cap of ``limit`` connections per client address."""
    return type("PerClientProtocol", (PerClientLimit,), {
        "inner": inner, "limit": limit, "open": Counter(),
        "on_refuse": staticmethod(on_refuse) if on_refuse is not None else None})


def guarded_protocol(config: GatewayConfig, on_refuse: Any = None) -> type[GuardedProtocol]:
    """The protocol class uvicorn builds a connection with, carrying ``config``'s bounds."""
    return type("GatewayProtocol", (GuardedProtocol,), {"limits": config, "on_refuse": staticmethod(on_refuse)
                                                        if on_refuse is not None else None})


def uvicorn_config(app: Any, config: GatewayConfig, **kw: Any) -> Any:
    """A ``uvicorn.Config`` for the gateway: its protocol, its keep-alive, no access log of uvicorn's own."""
    import uvicorn

    kw.setdefault("log_level", "warning")
    gateway = getattr(app, "gateway", None)  # create_app's: its metrics count what the protocol refuses
    on_refuse = (lambda kind: gateway.metrics.refused.labels(kind).inc()) if gateway is not None else None
    kw.setdefault("ws", "none")  # no WebSocket routes; an upgrade would swap the protocol under PerClientLimit
    http = per_client(guarded_protocol(config, on_refuse), config.max_connections_per_client, on_refuse)
    return uvicorn.Config(app, http=http, timeout_keep_alive=config.keep_alive_s,  # type: ignore[arg-type]  # uvicorn annotates int; a float of seconds works (call_later)
                          access_log=False, log_config=None, **kw)
