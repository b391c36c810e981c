"""Argument checks shared by the router, the gate and the guard: misuse fails at construction, by name."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from jev_shared import Example

#: The answers a yes/no example may give.
NOUL_ANSWERS = (True, False, "true", "false")


def check_threshold(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: must be a number in [0, 1], got {value!r}")
    return float(value)


def check_text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name}: must be a non-empty string, got {value!r}")
    return value


def check_option(name: str, value: Any, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: must be one of {list(allowed)}, got {value!r}")
    return value


def check_state(state: Any) -> Callable[[Any], Any] | None:
    if state is not None and not callable(state):
        raise TypeError(f"state: expected a callable that turns the input into a state, got {type(state).__name__}")
    return state


def check_band(threshold: float, block_below: Any) -> float | None:
    """The "ask a human" band is [block_below, threshold): below it blocks, at or above threshold allows."""
    if block_below is None:
        return None
    low = check_threshold("block_below", block_below)
    if low > threshold:
        raise ValueError(f"block_below: must be <= threshold ({threshold}), got {low}")
    return low


def check_examples(examples: Sequence[Any] | None, allowed: Collection[Any], what: str) -> list[Example] | None:
    """Few-shot examples must answer with one of ``allowed``; checked now, not at the first request.

    ``what`` says what went wrong, with ``{answer}`` for the offending answer."""
    if examples is None:
        return None
    checked = []
    for i, ex in enumerate(examples):
        ex = ex if isinstance(ex, Example) else Example.model_validate(ex)
        if type(ex.answer) is int or ex.answer not in allowed:
            raise ValueError(f"examples[{i}].answer: " + what.format(answer=repr(ex.answer)))
        checked.append(ex)
    return checked


def check_noul_examples(examples: Sequence[Any] | None) -> list[Example] | None:
    return check_examples(examples, NOUL_ANSWERS, "a yes/no example answers True or False, got {answer}")


def check_noul_criteria(criteria: Any) -> dict[str, str] | None:
    """Yes/no criteria describe only "true" and "false"; checked now, not at the first request."""
    if criteria is None:
        return None
    if not isinstance(criteria, Mapping) or not set(criteria) <= {"true", "false"}:
        raise ValueError(f"criteria: a yes/no question takes only 'true' and 'false' descriptions, got {criteria!r}")
    return dict(criteria)


def check_n_messages(n_messages: Any) -> int:
    if isinstance(n_messages, bool) or not isinstance(n_messages, int) or n_messages < 0:
        raise ValueError(f"n_messages: must be an integer >= 0, got {n_messages!r}")
    return n_messages
