"""A small OpenAI-compatible backend for the gateway tests: deterministic answers, injectable faults.

Answers follow the prompt: a state carrying ``want=<option>`` and ``truth=<yes|no>`` gets a
logprob window led by that option and that word, so each request's answer is known from its own
state (a mixed-up answer in the load test shows). ``fault`` switches every reply to a 429 (with
``Retry-After``), a 500, or a hang; ``requests`` counts what reached the backend. It is the tests'
loopback server (:mod:`tests.helpers.server`) answering with the shared reply builders.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from tests.helpers.replies import chat, error, window
from tests.helpers.server import Loopback
from tests.helpers.wire import Reply, Request

WANT = re.compile(r"want=(\w+)")
TRUTH = re.compile(r"truth=(yes|no)")


def window_for(prompt: str) -> list[dict[str, Any]]:
    """The top-logprob window: the wanted option, the truth word, then the opposite word and fillers."""
    want = WANT.search(prompt)
    truth = TRUTH.search(prompt)
    word = truth.group(1) if truth else "yes"
    tokens = [(want.group(1) if want else "A", -0.05), (word, -0.1), ("no" if word == "yes" else "yes", -4.0),
              ("0", -0.3), ("1", -1.0), ("2", -2.0), ("The", -6.0)]
    return window(tokens)[0]["top_logprobs"]


def chat_reply(prompt: str) -> bytes:
    entries = window_for(prompt)
    top = entries[0]
    return json.dumps(chat(top["token"], {"content": [{**top, "top_logprobs": entries}]}, "length",
                           usage=(50, 1))).encode()


class FaultStub(Loopback):
    """``with FaultStub() as stub: stub.base_url, stub.requests, stub.fault = "429"``."""

    def __init__(self, latency_s: float = 0.0) -> None:
        super().__init__()
        self.latency_s = latency_s  # slept in respond(), after the fault checks (inside a subclass's count)
        self.fault: str | None = None  # None | "429" | "500" | "hang"
        self.retry_after = "7"
        self.release = threading.Event()
        self._lock = self.lock

    @property
    def requests(self) -> int:
        return len(self.log)

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r.body if isinstance(r.body, dict) else {} for r in self.log]

    def handle(self, req: Request) -> Reply:
        status, headers, payload = self.respond(req.body if isinstance(req.body, dict) else {})
        return Reply(status, payload, {"content-type": "application/json", **headers})

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        if self.fault == "hang":
            self.release.wait(10)
        if self.fault == "429":
            return 429, {"retry-after": self.retry_after}, json.dumps(error("slow down")).encode()
        if self.fault == "500":
            return 500, {}, json.dumps(error("the backend broke", type="server_error")).encode()
        if self.latency_s:
            time.sleep(self.latency_s)
        prompt = json.dumps(body.get("messages", []))
        return 200, {}, chat_reply(prompt)

    def reset(self) -> None:
        with self.lock:
            self.fault = None
            self.log.clear()

    def stop(self) -> None:
        self.release.set()
        super().stop()
