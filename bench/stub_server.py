"""A local OpenAI-compatible stub with a fixed latency: isolates client-side cost from the model's.

It answers every /v1/chat/completions with a one-token reply and a 20-entry logprob window after
sleeping ``latency_s``, in a thread per request, so concurrency is real.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WINDOW = [{"token": t, "logprob": -0.1 * i, "bytes": list(t.encode())}
          for i, t in enumerate(["A", "B", "C", "D", " A", "The", "a", "b", "E", "F",
                                 "G", "H", "I", "J", "K", "L", "M", "N", "O", "P"])]


def reply_body(finish_reason: str = "length") -> bytes:
    """The one-token reply ``A``: cut at the cap ("length") or finished by the model ("stop")."""
    return json.dumps({
        "id": "chatcmpl-stub", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": {"role": "assistant", "content": "A"},
                     "logprobs": {"content": [{"token": "A", "logprob": 0.0, "bytes": [65], "top_logprobs": WINDOW}]}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 1, "total_tokens": 101},
    }).encode()


BODY = reply_body()


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default listen backlog of 5 refuses connections from 32 clients
    daemon_threads = True


class StubServer:
    """``with StubServer(latency_s=0.02) as base_url: ...``"""

    def __init__(self, latency_s: float = 0.02, body: bytes = BODY) -> None:
        latency = latency_s

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                self.rfile.read(int(self.headers.get("content-length", 0)))
                time.sleep(latency)
                # one write for head and body: two small writes meet Nagle + delayed ACK (+40 ms)
                head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
                self.wfile.write(head.encode() + body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)

    def __enter__(self) -> str:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
