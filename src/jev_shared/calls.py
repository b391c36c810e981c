"""Calls: what a flow asks for and what it gets back, the only things that cross the I/O line.

A flow (see :mod:`flows`) yields a :class:`Call` and is sent a :class:`Reply`; the drivers in
:mod:`drive` do the sending. :class:`Budget` is the call's total time, shared by its questions.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .errors import DecisionTimeoutError

T = TypeVar("T")
#: A per-question flow: yields calls, is sent replies (or thrown ProviderErrors), returns its result.
Flow = Generator["Call", "Reply", T]


@dataclass
class Budget:
    """The call's total time, shared by its questions' requests.

    No attempt starts once the budget ran out or the call was given up (``cancel``), and each
    attempt is capped by what is left, so no request leaves after the call has failed.
    """

    deadline: float | None = None  # time.perf_counter() value
    #: set once, by any thread, never cleared (a flag, not a ``threading.Event``: nothing waits on it, and an
    #: Event's lock and condition were 0.01 ms of every call)
    cancelled: bool = False
    timeout_s: float | None = None

    @classmethod
    def of(cls, timeout_s: float | None) -> Budget:
        deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        return cls(deadline, timeout_s=timeout_s)

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.perf_counter()

    def cancel(self) -> None:
        self.cancelled = True

    def check(self) -> None:
        """Raise rather than start an attempt the call can no longer use."""
        left = self.left()
        if self.cancelled or (left is not None and left <= 0):
            raise DecisionTimeoutError(f"the call's total timeout of {self.timeout_s}s ran out"
                                       if left is not None and left <= 0 else "the call was given up")


NO_BUDGET = Budget()


@dataclass
class Call:
    """One provider call: the surface, the client method's attribute path, and its keyword arguments."""

    surface: str
    kwargs: dict[str, Any]
    #: e.g. ("chat", "completions", "create"); the surfaces module fills it in.
    path: tuple[str, ...] = ()


@dataclass
class Reply:
    body: dict[str, Any]
    latency_ms: float
    n_retries: int = 0
    headers: dict[str, str] = field(default_factory=dict)
