"""JSON readouts: a structured, discrete or ratings (System 2) answer → a distribution.

Every object is checked against the shape its method asked for; anything else is a
:class:`MalformedAnswerError`, which earns one corrective retry.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import MalformedAnswerError

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_INTEGRAL = re.compile(r"^\s*[+-]?\d+(\.0*)?\s*$")


def strip_think(content: str) -> str:
    """Remove inline think blocks (and an unclosed leading one) before parsing."""
    text = _THINK.sub("", content)
    lowered = text.lower()
    for tag in ("</think>", "</thinking>", "</reasoning>"):
        if tag in lowered:  # an opening tag the template swallowed
            text = text[lowered.rindex(tag) + len(tag):]
            lowered = text.lower()
    return text.strip()


def parse_object(content: str) -> dict[str, Any]:
    """json.loads, else decode from the first '{' (prose or fences around the object)."""
    text = content.strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        start = text.find("{")
        if start < 0:
            raise MalformedAnswerError("the reply holds no JSON object") from None
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError as exc:
            raise MalformedAnswerError(f"the reply is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise MalformedAnswerError(f"the reply is a JSON {type(value).__name__}, not an object")
    return value


def _exact_keys(obj: Mapping[str, Any], expected: Sequence[str], where: str) -> None:
    got = list(obj)
    if set(got) != set(expected) or len(got) != len(expected):
        missing = [k for k in expected if k not in obj]
        extra = [k for k in got if k not in expected]
        raise MalformedAnswerError(f"{where} must have exactly the keys {list(expected)}; missing {missing}, extra {extra}")


def _number(v: Any, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise MalformedAnswerError(f"value for {key!r} is not a finite number")
    return float(v)


@dataclass
class JsonReadout:
    probs: list[float]
    source: str
    original: dict[str, Any] | None = None
    probability_error: float | None = None

    def debug(self) -> dict[str, Any]:
        d: dict[str, Any] = {"source": self.source}
        if self.probability_error is not None:
            d["probability_error"] = self.probability_error
            d["original_probabilities"] = self.original
        return d


def read_structured(keys: Sequence[str], kind: str, obj: Mapping[str, Any], normalize: bool = True) -> JsonReadout:
    if kind == "noul":
        _exact_keys(obj, ["noul"], "the object")
        v = _number(obj["noul"], "noul")
        if not 0.0 <= v <= 1.0:
            raise MalformedAnswerError("value for 'noul' must lie in [0, 1]")
        return JsonReadout([v, 1.0 - v], "structured")
    _exact_keys(obj, ["probabilities"], "the object")
    probs = obj["probabilities"]
    if not isinstance(probs, Mapping):
        raise MalformedAnswerError("'probabilities' must be an object")
    _exact_keys(probs, keys, "'probabilities'")
    values = [_number(probs[k], k) for k in keys]
    if any(v < 0 for v in values):
        raise MalformedAnswerError("probabilities must be >= 0")
    peak = max(values)
    scaled = [v / peak for v in values] if peak > 0 else values  # no overflow on 1e308 × 3
    total = sum(scaled) * (peak if peak > 0 else 1.0)
    error = abs(total - 1.0)
    if error <= 1e-6:
        return JsonReadout(values, "structured")
    final = (_uniform(len(values)) if peak == 0 else [s / sum(scaled) for s in scaled]) if normalize else values
    return JsonReadout(final, "structured", dict(probs), error)


def _uniform(n: int) -> list[float]:
    return [1.0 / n] * n


def _one_hot(n: int, i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(n)]


def read_discrete(keys: Sequence[str], labels: Sequence[str], kind: str, obj: Mapping[str, Any]) -> JsonReadout:
    _exact_keys(obj, [kind], "the object")  # the field is named after the kind: choice, score or noul
    v = obj[kind]
    n = len(keys)
    if kind == "noul":
        if isinstance(v, bool):
            return JsonReadout([1.0, 0.0] if v else [0.0, 1.0], "discrete")
        if isinstance(v, str) and v.strip().lower() in ("true", "false"):
            return JsonReadout([1.0, 0.0] if v.strip().lower() == "true" else [0.0, 1.0], "discrete")
        raise MalformedAnswerError("'noul' must be true or false")
    if kind == "score":
        if isinstance(v, bool):
            raise MalformedAnswerError("'score' must be a level index, not a boolean")
        text = repr(v) if isinstance(v, float) else str(v)
        if not isinstance(v, (int, float, str)) or not _INTEGRAL.match(text):
            raise MalformedAnswerError(f"'score' must be an integer level index 0..{n - 1}")
        level = int(float(text))
        if not 0 <= level < n:
            raise MalformedAnswerError(f"'score' must be an integer level index 0..{n - 1}")
        return JsonReadout(_one_hot(n, level), "discrete")
    if not isinstance(v, str):
        raise MalformedAnswerError("'choice' must be a string: an option key or its label")
    if v in keys:
        return JsonReadout(_one_hot(n, list(keys).index(v)), "discrete")
    if v.isascii() and v.strip().upper() in labels:
        return JsonReadout(_one_hot(n, list(labels).index(v.strip().upper())), "discrete")
    raise MalformedAnswerError(f"'choice' is not one of the options {list(keys)} or labels")


def read_ratings(keys: Sequence[str], obj: Mapping[str, Any]) -> JsonReadout:
    """System 2: integer ratings 0–10 per candidate, normalised (all zero → uniform)."""
    _exact_keys(obj, keys, "the ratings object")
    values = []
    for k in keys:
        v = _number(obj[k], k)
        if v != int(v) or not 0 <= v <= 10:
            raise MalformedAnswerError(f"rating for {k!r} must be an integer from 0 to 10")
        values.append(v)
    total = sum(values)
    return JsonReadout(_uniform(len(values)) if total == 0 else [v / total for v in values], "ratings", dict(obj))


def read_json(method: str, keys: Sequence[str], labels: Sequence[str], kind: str, obj: Mapping[str, Any],
              normalize: bool = True) -> JsonReadout:
    """The readout ``method`` asked for: structured, discrete or ratings."""
    if method == "structured":
        return read_structured(keys, kind, obj, normalize)
    if method == "discrete":
        return read_discrete(keys, labels, kind, obj)
    return read_ratings(keys, obj)
