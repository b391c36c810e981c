"""A small OpenAI-compatible backend for the gateway tests: deterministic answers, injectable faults.

Answers follow the prompt: a state carrying ``want=<option>`` and ``truth=<yes|no>`` gets a
logprob window led by that option and that word, so each request's answer is known from its own
state (a mixed-up answer in the load test shows). ``fault`` switches every reply to a 429 (with
``Retry-After``), a 500, or a hang; ``requests`` counts what reached the backend.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WANT = re.compile(r"want=(\w+)")
TRUTH = re.compile(r"truth=(yes|no)")


def window_for(prompt: str) -> list[dict[str, Any]]:
    """The top-logprob window: the wanted option, the truth word, then the opposite word and fillers."""
    want = WANT.search(prompt)
    truth = TRUTH.search(prompt)
    word = truth.group(1) if truth else "yes"
    tokens = [(want.group(1) if want else "A", -0.05), (word, -0.1), ("no" if word == "yes" else "yes", -4.0),
              ("0", -0.3), ("1", -1.0), ("2", -2.0), ("The", -6.0)]
    return [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in tokens]


def chat_reply(prompt: str) -> bytes:
    window = window_for(prompt)
    top = window[0]
    return json.dumps({
        "id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "stub",
        "choices": [{"index": 0, "finish_reason": "length", "message": {"role": "assistant", "content": top["token"]},
                     "logprobs": {"content": [{**top, "top_logprobs": window}]}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 1, "total_tokens": 51},
    }).encode()


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default listen backlog of 5 refuses connections under load
    daemon_threads = True


class FaultStub:
    """``with FaultStub() as stub: stub.base_url, stub.requests, stub.fault = "429"``."""

    def __init__(self, latency_s: float = 0.0) -> None:
        self.latency_s = latency_s
        self.fault: str | None = None  # None | "429" | "500" | "hang"
        self.retry_after = "7"
        self.requests = 0
        self.bodies: list[dict[str, Any]] = []
        self.release = threading.Event()
        self._lock = threading.Lock()
        self.httpd = _Server(("127.0.0.1", 0), self._handler())
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with stub._lock:
                    stub.requests += 1
                    stub.bodies.append(body)
                status, headers, payload = stub.respond(body)
                head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
                self.wfile.write((head + "\r\n").encode() + payload)

            def log_message(self, *args: object) -> None:
                pass

        return Handler

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if self.fault == "hang":
            self.release.wait(10)
        if self.fault == "429":
            return 429, {"retry-after": self.retry_after}, b'{"error": {"message": "slow down"}}'
        if self.fault == "500":
            return 500, {}, b'{"error": {"message": "the backend broke"}}'
        if self.latency_s:
            time.sleep(self.latency_s)
        prompt = json.dumps(body.get("messages", []))
        return 200, {}, chat_reply(prompt)

    def reset(self) -> None:
        with self._lock:
            self.fault, self.requests, self.bodies = None, 0, []

    def __enter__(self) -> FaultStub:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
