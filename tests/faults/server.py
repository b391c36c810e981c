"""A loopback HTTP server that injects faults into the three surfaces the engine speaks.

It answers ``/v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` the way a provider
would, so the real openai and anthropic SDKs (and the engine's transport) see real HTTP. A test
arms a script of faults; each request whose body carries the marker gets the next one, every
other request a good reply read off the request itself (the labels the prompt asks for, or the
JSON schema it sends). Every request is recorded, so tests assert what went over the wire.
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MARKER = "FAULT"


@dataclass
class Request:
    """One request as it arrived: path, headers (lower-cased names) and JSON body."""

    path: str
    headers: dict[str, str]
    body: Any
    raw: bytes

    @property
    def surface(self) -> str:
        return {"/v1/chat/completions": "chat_completions", "/v1/responses": "responses",
                "/v1/messages": "messages"}.get(self.path, self.path)

    @property
    def marked(self) -> bool:
        return MARKER.encode() in self.raw


@dataclass
class Reply:
    """What a request gets back: a status, a raw body and headers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})


@dataclass(frozen=True)
class Reset:
    """Close the connection without a reply (an RST)."""


@dataclass(frozen=True)
class Hang:
    """Hold the request ``seconds`` (or until the server stops), then close it without a reply."""

    seconds: float


Action = Reply | Reset | Hang
Fault = Callable[[Request], Action]


def json_reply(obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> Reply:
    """A JSON body; NaN and Infinity are written as the literals some servers send."""
    return Reply(status, json.dumps(obj, allow_nan=True).encode(), {"content-type": "application/json", **(headers or {})})


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a cancelled call, a closed loop) is expected here, not an error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class FaultServer:
    """``with FaultServer(good) as srv: srv.arm([fault, ...]); ... srv.marked()``."""

    def __init__(self, good: Fault) -> None:
        self.good = good
        self.requests: list[Request] = []
        self._script: list[Fault] = []
        self._forever: Fault | None = None
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = None
                req = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw)
                server._act(self, server._next(req))

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    # -- the script ------------------------------------------------------------------------------

    def arm(self, faults: Sequence[Fault], *, forever: bool = False) -> None:
        """Marked requests get ``faults`` in turn; with ``forever`` the last one repeats, else good replies."""
        with self._lock:
            self._script = list(faults)
            self._forever = faults[-1] if forever and faults else None

    def _next(self, req: Request) -> Action:
        with self._lock:
            self.requests.append(req)
            if not req.marked:
                fault = self.good
            elif self._script:
                fault = self._script.pop(0)
            else:
                fault = self._forever or self.good
        return fault(req)

    def marked(self) -> list[Request]:
        """The requests that carried the marker (the faulty question's), in order."""
        with self._lock:
            return [r for r in self.requests if r.marked]

    # -- the wire --------------------------------------------------------------------------------

    def _act(self, handler: BaseHTTPRequestHandler, action: Action) -> None:
        if isinstance(action, Hang):
            self.stopping.wait(action.seconds)
            action = Reset()
        if isinstance(action, Reset):
            handler.close_connection = True
            sock = handler.connection
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
            return
        head = f"HTTP/1.1 {action.status} X\r\ncontent-length: {len(action.body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in action.headers.items())
        try:  # one write for head and body: two small writes meet Nagle + delayed ACK
            handler.wfile.write(head.encode() + b"\r\n" + action.body)
        except OSError:
            handler.close_connection = True

    def __enter__(self) -> FaultServer:
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()
