"""What one request and one reply are, for the in-process provider and the loopback server alike.

A handler is a function of the :class:`Request` it answers; it returns an :data:`Action` (a
:class:`Reply`, a :class:`Reset` or a :class:`Hang`) or a plain JSON-able body (a 200). The same
handler serves :func:`tests.helpers.provider.provider` (the real SDK over ``MockTransport``) and
:class:`tests.helpers.server.Loopback` (real sockets).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: A request whose body carries this word is the one a fault script answers (the fault matrix).
MARKER = "FAULT"

SURFACES = {"/v1/chat/completions": "chat_completions", "/v1/responses": "responses", "/v1/messages": "messages",
            "/v1/decisions": "decisions", "/v1/systemone": "systemone"}


@dataclass
class Request:
    """One request as it arrived: method, path, headers (lower-cased names), parsed JSON body, raw bytes.

    ``request["messages"]`` reads the body, so a test asserts on what went over the wire.
    """

    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes = b""
    method: str = "POST"
    #: When it arrived (``time.perf_counter()``).
    at: float = field(default_factory=time.perf_counter)

    @property
    def surface(self) -> str:
        return SURFACES.get(self.path, self.path)

    @property
    def marked(self) -> bool:
        return MARKER.encode() in self.raw

    def __getitem__(self, key: str) -> Any:
        return self.body[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(self.body, dict) and key in self.body

    def get(self, key: str, default: Any = None) -> Any:
        return self.body.get(key, default) if isinstance(self.body, dict) else default

    @classmethod
    def of(cls, method: str, path: str, headers: Any, raw: bytes) -> Request:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        return cls(path, {k.lower(): v for k, v in headers.items()}, body, raw, method)


@dataclass
class Reply:
    """What a request gets back: a status, a raw body and headers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})


@dataclass(frozen=True)
class Reset:
    """Close the connection without a reply (an RST; in process, a connection error)."""


@dataclass(frozen=True)
class Hang:
    """Hold the request ``seconds`` (or until the server stops), then close it without a reply."""

    seconds: float


Action = Reply | Reset | Hang
Handler = Callable[[Request], Any]


def json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A JSON body; NaN and Infinity are written as the literals some servers send."""
    return Reply(status, json.dumps(obj, allow_nan=True).encode(), {"content-type": "application/json", **(headers or {})})


def act(handler: Handler, request: Request) -> Action:
    """The handler's answer as an action: a body that is not one already is a 200 JSON reply."""
    out = handler(request)
    return out if isinstance(out, (Reply, Reset, Hang)) else json_reply(out)
