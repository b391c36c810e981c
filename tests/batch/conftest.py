"""Batch fixtures: the gateway tests' stub backend, plus per-item faults, a held item and an in-flight count."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from tests.gateway.stub import FaultStub

TEAM = {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "payments", "technical": "bugs"}}
SPAM = {"type": "noul", "instructions": "This is spam."}
QUESTIONS = {"team": TEAM, "spam": SPAM}


class BatchStub(FaultStub):
    """A state with ``#boom#`` gets a 500, one with ``#hold#`` waits for ``release``; ``max_in_flight`` is the peak."""

    def __init__(self, latency_s: float = 0.0) -> None:
        super().__init__(latency_s)
        self.in_flight = 0
        self.max_in_flight = 0
        self.held = threading.Event()
        #: Requests after this many wait for ``release`` (a run frozen at a known point, to be killed there).
        self.hold_after: int | None = None
        self.seq = 0

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        prompt = json.dumps([m for m in body.get("messages", []) if m.get("role") == "user"])
        with self._lock:
            self.seq += 1
            n = self.seq
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if "#boom#" in prompt:
                return 500, {}, b'{"error": {"message": "the backend broke"}}'
            if "#hold#" in prompt or (self.hold_after is not None and n > self.hold_after):
                self.held.set()
                self.release.wait(20)
            return super().respond(body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def reset(self) -> None:
        super().reset()
        self.hold_after, self.seq = None, 0
        self.in_flight = self.max_in_flight = 0
        self.release.clear()
        self.held.clear()

    def prompts(self) -> list[str]:
        """Every state the backend was asked about (the user turn of each request)."""
        return [m["content"] for b in self.bodies for m in b.get("messages", []) if m.get("role") == "user"]


@pytest.fixture(scope="session")
def batch_backend():
    with BatchStub() as stub:
        yield stub


@pytest.fixture
def stub(batch_backend):
    batch_backend.reset()
    yield batch_backend
    batch_backend.release.set()
    batch_backend.reset()
