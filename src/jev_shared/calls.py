"""Calls: what a flow asks for and what it gets back, the only things that cross the I/O line.

A flow (see :mod:`flows`) yields a :class:`Call` and is sent a :class:`Reply`; the drivers in
:mod:`drive` do the sending. :class:`Budget` is the call's total time, shared by its questions.

A call carries what the flow that built it knows: its :class:`Intent` (a question's answer, a debias prior, the
content-free twin, a repair turn, a read-on, a hosted call) and its :class:`Prompt` (the messages as the engine
wrote them, before any wire translation). Whatever wraps the send (the embedded server's kept prompts,
``local/slots.py``) reads those, never the wire's own fields.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Generator
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
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
#: The budget of the call being planned in this context (the planner sets it while it may ask the server's
#: tokenizer): that I/O is the call's too, bounded by its deadline on the first call as on any other.
PLANNING: ContextVar[Budget | None] = ContextVar("jev_planning_budget", default=None)


def planning_time_left(default: float | None = None) -> float | None:
    """Seconds left for I/O while a call is planned (at most ``default``), or ``default`` outside a call with a
    deadline; a DecisionTimeoutError once the call's time ran out."""
    budget = PLANNING.get()
    left = None if budget is None else budget.left()
    if budget is None or left is None:
        return default
    budget.check()
    return left if default is None else min(left, default)


class Intent(StrEnum):
    """What a call is for, as the flow that builds it knows."""

    #: a question's own request, about the caller's state
    ANSWER = "answer"
    #: the same prompt again, after a reply that could not be read, saying why
    REPAIR = "repair"
    #: a shared prefix of several option names prefilled, its next token read
    READ_ON = "read-on"
    #: a debias prior's request about an example's state, held out from the examples asked with it
    PRIOR = "prior"
    #: a debias prior's request about a content-free state
    CONTENT_FREE = "content-free"
    #: the content-free twin: the question's prompt with the state ``N/A`` (the first content-free prior)
    TWIN = "twin"
    #: every question in one request to a hosted wire
    HOSTED = "hosted"


@dataclass(frozen=True)
class Prompt:
    """The messages as the engine wrote them, before any wire translation.

    ``stem`` is the part that holds no state where the state comes last (its system message: the rules, the question
    and its options; with examples, their turns too; the state alone follows), else None. A repair turn keeps
    the stem of the prompt it repairs. :attr:`key` names the stem for a model, the same on every run.
    """

    model: str
    messages: list[dict[str, Any]]
    stem: str | None = None
    #: How many examples the stem shows before the state (0: zero-shot).
    examples: int = 0

    @cached_property
    def key(self) -> str | None:
        """The stem's stable key (the model and the stem, hashed), or None where there is no stem."""
        if self.stem is None:
            return None
        return hashlib.sha256(json.dumps([self.model, self.stem]).encode()).hexdigest()[:32]


@dataclass
class Call:
    """One provider call: the surface, the client method's attribute path, and its keyword arguments; what it is
    for (``intent``) and the prompt it carries (``prompt``), set by the flow that builds it."""

    surface: str
    kwargs: dict[str, Any]
    #: e.g. ("chat", "completions", "create"); the surfaces module fills it in.
    path: tuple[str, ...] = ()
    intent: Intent = Intent.ANSWER
    prompt: Prompt | None = field(default=None, compare=False)
    #: The content-free twin of this call, built when asked (the same prompt and fields, the state ``N/A``), where
    #: the prompt has a stem; else None.
    twin: Callable[[], Call] | None = field(default=None, repr=False, compare=False)


#: The most tokens a token read writes: the first, and the tokens that part names sharing it (pathread.py).
MAX_READ_TOKENS = 6
#: The debias prior's content-free states (Zhao et al. 2021, "Calibrate Before Use"); the first is the twin's.
CONTENT_FREE_STATES = ("N/A", "", "[MASK]")
#: The intents of a request about a content-free state (never a caller's).
CONTENT_FREE_INTENTS = frozenset({Intent.CONTENT_FREE, Intent.TWIN})


@dataclass
class Reply:
    body: dict[str, Any]
    latency_ms: float
    n_retries: int = 0
    headers: dict[str, str] = field(default_factory=dict)
