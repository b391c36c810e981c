"""Argument checks the selectors and the node filter share, so each rule and its message is written once."""

from __future__ import annotations

from typing import Any


def unit_interval(name: str, value: float) -> float:
    """``value`` when it lies in [0, 1] (a probability or a confidence), else a ValueError naming ``name``."""
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name}: must lie in [0, 1], got {value}")
    return value


def int_at_least(name: str, value: Any, low: int) -> None:
    """Reject anything but an integer >= ``low`` (None is the caller's to allow)."""
    if not isinstance(value, int) or value < low:
        raise ValueError(f"{name}: must be an integer >= {low}, got {value!r}")


def one_of(name: str, value: Any, allowed: tuple[Any, ...]) -> None:
    """Reject a value outside ``allowed``, listing them as today's messages do ("a, b or c")."""
    if value not in allowed:
        words = [repr(a) for a in allowed]
        listed = ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]
        raise ValueError(f"{name}: must be {listed}, got {value!r}")
