"""A calibration file checked whole before any of it is used, and where in the file a bad value is.

Every number that can change an answer (a temperature, an offset, a top-label scaling, a feature map's, a
gate threshold, the target) must be finite and in its range: ``NaN`` as an offset turned every answer of its
question into ``NaN`` probabilities (invalid JSON on a wire) and a wrong choice. :func:`check_calibration`
names the first bad value by its path in the file (``("biases", "team", "billing")``) and :func:`line_of` finds
that path's line in the file's text, so a refusal reads ``calibration.json:12: biases.team.billing: ...``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

Path = tuple[str | int, ...]
#: The parts of a calibration file that change answers; ``report`` is a record of the fit, read by no answer.
ANSWERING = ("temperatures", "biases", "tops", "maps", "thresholds", "target", "decision_sets", "base")
_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


class CalibrationFileError(ValueError):
    """A calibration file's value that is not one: ``path`` says where in the file (keys and list indexes)."""

    def __init__(self, message: str, path: Path = ()) -> None:
        self.path = path
        self.reason = message
        where = ".".join(str(p) for p in path)
        super().__init__(f"{where}: {message}" if where else message)


def check_calibration(d: Mapping[str, Any]) -> None:
    """Raise :class:`CalibrationFileError` at the first value of ``d`` (a parsed calibration file) that is not
    a finite number in its range where one belongs; nothing else is read."""
    nan = non_finite({k: d[k] for k in ANSWERING if k in d})
    if nan is not None:
        raise CalibrationFileError("not a finite number (NaN and Infinity change every answer they touch)", nan)
    for key, t in _entries(d, "temperatures"):
        _number(t, ("temperatures", key), low=0.0, open_low=True)
    for key, offsets in _entries(d, "biases"):
        for option, b in _items(offsets, ("biases", key)):
            _number(b, ("biases", key, option))
    for key, top in _entries(d, "tops"):
        if not isinstance(top, Sequence) or isinstance(top, str) or len(top) != 2:
            raise CalibrationFileError(f"must be [slope, shift], got {top!r}", ("tops", key))
        for i, x in enumerate(top):
            _number(x, ("tops", key, i))
    for key, fmap in _entries(d, "maps"):
        for part in ("slope", "shift"):
            for k, x in _items(fmap.get(part, {}) if isinstance(fmap, Mapping) else None, ("maps", key, part)):
                _number(x, ("maps", key, part, k))
    for key, t in _entries(d, "thresholds"):
        if t is not None:
            _number(t, ("thresholds", key), low=0.0, high=1.0)
    if "target" in d:
        _number(d["target"], ("target",), low=0.0, high=1.0, open_low=True)


def located(where: str, text: str, exc: ValueError) -> ValueError:
    """``exc`` as one line naming the file and, for a :class:`CalibrationFileError`, the line of its value."""
    line = line_of(text, exc.path) if isinstance(exc, CalibrationFileError) else None
    return ValueError(f"{where}:{line}: {exc}" if line is not None else f"{where}: {exc}")


def non_finite(data: Any, path: Path = ()) -> Path | None:
    """The path of the first NaN or ±Infinity in ``data`` (parsed JSON), in the file's order; None if none."""
    if isinstance(data, float):
        return None if math.isfinite(data) else path
    if isinstance(data, Mapping):
        items: Any = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    else:
        return None
    for key, value in items:
        found = non_finite(value, (*path, key))
        if found is not None:
            return found
    return None


def line_of(text: str, path: Path) -> int | None:
    """The line (from 1) where the value at ``path`` starts in the JSON ``text``; None where it is not found."""
    try:
        at: int | None = _skip(text, 0)
        for step in path:
            at = _member(text, at, step) if at is not None else None
            if at is None:
                return None
    except (ValueError, IndexError):
        return None
    return text.count("\n", 0, at) + 1


def _member(text: str, at: int, step: str | int) -> int | None:
    """Where the value of key (or index) ``step`` of the object (or list) starting at ``at`` starts."""
    opening = text[at]
    if opening not in "{[" or (opening == "{") != isinstance(step, str):
        return None
    at, index = _skip(text, at + 1), 0
    while text[at] not in "}]":
        if opening == "{":
            key, at = json.decoder.scanstring(text, at + 1)  # type: ignore[attr-defined]
            at = _skip(text, _skip(text, at) + 1)  # past the colon
        found = key == step if opening == "{" else index == step
        if found:
            return at
        _, at = _DECODER.raw_decode(text, at)
        at = _skip(text, at)
        if text[at] == ",":
            at = _skip(text, at + 1)
        index += 1
    return None


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _SPACE:
        at += 1
    return at


def _entries(d: Mapping[str, Any], part: str) -> list[tuple[str, Any]]:
    return _items(d.get(part) if d.get(part) is not None else {}, (part,))


def _items(value: Any, path: Path) -> list[tuple[str, Any]]:
    if not isinstance(value, Mapping):
        raise CalibrationFileError(f"must be an object, got {value!r}", path)
    return [(str(k), v) for k, v in value.items()]


def _number(value: Any, path: Path, low: float = -math.inf, high: float = math.inf, open_low: bool = False) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CalibrationFileError(f"must be a number, got {value!r}", path)
    if not math.isfinite(value) or value > high or value < low or (open_low and value == low):
        bound = f"above {low:g}" if open_low else f"at least {low:g}"
        span = f"{bound} and at most {high:g}" if math.isfinite(high) else bound
        what = "a finite number" + (f" {span}" if math.isfinite(low) else "")
        raise CalibrationFileError(f"must be {what}, got {value!r}", path)


__all__ = ["ANSWERING", "CalibrationFileError", "check_calibration", "line_of", "located", "non_finite"]
