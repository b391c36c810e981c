"""One loopback HTTP server for every test and bench that needs real sockets.

It answers each POST with ``handle(request)`` (a handler of :mod:`tests.helpers.wire`, the same the
in-process provider takes), after ``latency_s``, in a thread per request so concurrency is real.
Every request is recorded on ``log`` unless ``record=False`` (a bench's long run). A
:class:`~tests.helpers.wire.Reset` closes the socket with an RST; a :class:`~tests.helpers.wire.Hang`
holds it (until the server stops) and then closes it.

    with Loopback(windows({"A": -0.1})) as srv:
        openai.OpenAI(base_url=srv.base_url, api_key="k")  # srv.url is the root, base_url ends in /v1
"""

from __future__ import annotations

import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .wire import Action, Handler, Hang, Request, Reset, act


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default listen backlog of 5 refuses connections under load
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that hangs up (a cancelled call, a closed loop) is expected here, not an error."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class Loopback:
    """``with Loopback(handler) as srv: srv.base_url, srv.log``; subclasses override :meth:`handle`."""

    def __init__(self, respond: Handler | None = None, *, latency_s: float = 0.0, record: bool = True) -> None:
        self._respond = respond
        self.wait_s = latency_s
        self.record = record
        self.log: list[Request] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.answer(self, Request.of("POST", self.path, self.headers, raw))

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.base_url = self.url + "/v1"

    def handle(self, req: Request) -> Any:
        """The reply to one request (the handler given, by default); subclasses override it."""
        assert self._respond is not None, "Loopback needs a handler or a respond() of its own"
        return self._respond(req)

    def answer(self, handler: BaseHTTPRequestHandler, req: Request) -> None:
        if self.record:
            with self.lock:
                self.log.append(req)
        if self.wait_s:
            time.sleep(self.wait_s)
        self._write(handler, act(self.handle, req))

    def _write(self, handler: BaseHTTPRequestHandler, action: Action) -> None:
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
        try:  # one write for head and body: two small writes meet Nagle + delayed ACK (+40 ms)
            handler.wfile.write(head.encode() + b"\r\n" + action.body)
        except OSError:
            handler.close_connection = True

    def start(self) -> Loopback:
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Loopback:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
