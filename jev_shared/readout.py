"""Readout: a provider's token window → a distribution over a question's labels.

Works on plain dicts (the transport normalises SDK objects), so it is pure and easy to test.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import LabelReadoutError, MalformedAnswerError


class AmbiguousNamesError(LabelReadoutError):
    """Option names whose first tokens collide: read with letters instead."""

Missing = Literal["zero", "floor"]
_OPEN = "([{\"'*"
_CLOSE = ".):]}\"',*"


#: A prior below this is treated as this: dividing by a near-zero share would crown a label the
#: model never names.
PRIOR_FLOOR = 1e-3


def fold_label(token: str, labels: frozenset[str]) -> str | None:
    """" B", "b", "B.", "(B)" → "B"; ASCII only, so "ı" is never "I"; anything else → None."""
    t = token.strip().lstrip(_OPEN).rstrip(_CLOSE).strip()
    if not t or not t.isascii():
        return None
    t = t.upper()
    return t if t in labels else None


#: A token that starts more than one option name: it tells nothing apart.
AMBIGUOUS = "\x00ambiguous"
YES_WORDS = frozenset({"y", "yes", "yeah", "yep"})
NO_WORDS = frozenset({"n", "no", "nope", "nah"})
_ALPHA_RUN = re.compile(r"[A-Za-z]+")

Fold = Callable[[str], str | None]


def letter_fold(labels: Sequence[str]) -> Fold:
    label_set = frozenset(labels)
    return lambda token: fold_label(token, label_set)


def digit_fold(n: int) -> Fold:
    """Score levels as digits: an exact single digit only, so "10" or "1." cannot blur a level."""
    digits = frozenset(str(i) for i in range(n))
    return lambda token: token.strip() if token.strip() in digits else None


def yes_no_fold(token: str) -> str | None:
    """Noul as words: the first alphabetic run, lowercased: yes/yeah/yep/y → "yes", no/nope/nah/n → "no"."""
    run = _ALPHA_RUN.search(token)
    word = run.group(0).lower() if run else ""
    return "yes" if word in YES_WORDS else "no" if word in NO_WORDS else None


def name_fold(names: Sequence[str]) -> Fold:
    """A token counts for an option name when it starts that name (case-insensitive, spaces and
    punctuation stripped); a token that starts several names is AMBIGUOUS."""
    lowered = [n.lower() for n in names]

    def fold(token: str) -> str | None:
        t = token.strip().lstrip(_OPEN).rstrip(_CLOSE).strip().lower()
        if not t:
            return None
        hits = [n for n, low in zip(names, lowered) if low.startswith(t)]
        if len(hits) > 1:
            return AMBIGUOUS
        return hits[0] if hits else None

    return fold


def names_collide(names: Sequence[str]) -> bool:
    """Names a first token may not tell apart: one a prefix of another, or the same first word."""
    lowered = [n.strip().lower() for n in names]
    words = [re.split(r"[\s_\-/]+", n)[0] for n in lowered]
    if len(set(words)) < len(words):
        return True
    return any(a != b and b.startswith(a) for a in lowered for b in lowered)


@dataclass
class Readout:
    probs: list[float]
    labels_missing: list[str] = field(default_factory=list)
    no_signal: bool = False
    truncated: bool = False
    sampled: str | None = None
    logprobs: dict[str, float] = field(default_factory=dict)
    source: str = "logprobs"

    def debug(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sampled": self.sampled,
            "label_logprobs": self.logprobs,
            "labels_missing": self.labels_missing,
            "no_signal": self.no_signal,
            "truncated": self.truncated,
        }


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def answer_entry(entries: Sequence[Any], content: str | None) -> Any:
    """The logprob entry of the answer's first token.

    Reasoning servers report logprobs for the thinking span too; when the token stream ends
    exactly with ``content``, the answer starts where that tail does. Otherwise the stream is read
    as it arrives. Leading whitespace tokens are skipped when a later token exists.
    """
    tokens = [str(_get(e, "token") or "") for e in entries]
    start = 0
    if content and "".join(tokens) != content:
        tail = ""
        for i in range(len(tokens) - 1, -1, -1):
            tail = tokens[i] + tail
            if tail == content:
                start = i
                break
    for e, tok in zip(entries[start:], tokens[start:]):
        if tok.strip():
            return e
    return entries[start]


def read_labels(
    logprobs: Any,
    labels: Sequence[str],
    *,
    content: str | None = None,
    missing: Missing = "zero",
    method: str = "logprobs",
    fold: Fold | None = None,
) -> Readout:
    """Fold the window onto ``labels``, keep the best variant of each, softmax over labels only.

    ``fold`` maps a token to a label (default: letter folding); a token it calls AMBIGUOUS and that
    outranks every label raises :class:`AmbiguousNamesError`, so the caller can re-ask with letters.
    """
    fold = fold or letter_fold(labels)
    entries = _get(logprobs, "content") if logprobs is not None else None
    if not entries:
        raise LabelReadoutError(
            f"no logprobs returned for the answer token (method={method!r}); this provider cannot report "
            "a token distribution here: use method='structured' or method='discrete'",
            provider_cannot=True,
        )
    entry = answer_entry(entries, content)
    sampled = str(_get(entry, "token") or "")
    sampled_lp = _get(entry, "logprob")
    window = list(_get(entry, "top_logprobs") or [])
    if len(labels) == 1:
        return Readout([1.0], sampled=sampled, logprobs={labels[0]: 0.0})
    if sampled_lp is None:
        raise LabelReadoutError(f"no logprob for the answer token {sampled!r} (method={method!r})")
    others = [c for c in window if str(_get(c, "token")) != sampled or _get(c, "logprob") != sampled_lp]
    if not others:
        raise LabelReadoutError(
            f"the answer token's top_logprobs held nothing but the sampled token (method={method!r}); one "
            "logprob is not a distribution: raise top_logprobs, or use method='structured' or 'discrete'",
            provider_cannot=True,
        )

    best: dict[str, float] = {}
    ambiguous = -math.inf
    returned: list[float] = []
    for cand in [{"token": sampled, "logprob": sampled_lp}, *window]:
        lp = _get(cand, "logprob")
        if lp is None:  # a null alternative is simply not reported
            continue
        lp = float(lp)
        if math.isnan(lp) or lp == math.inf:
            raise LabelReadoutError(f"non-finite logprob {lp!r} for token {_get(cand, 'token')!r}")
        returned.append(lp)
        label = fold(str(_get(cand, "token") or ""))
        if label == AMBIGUOUS:
            ambiguous = max(ambiguous, lp)
        elif label is not None and lp > best.get(label, -math.inf):
            best[label] = lp
    if ambiguous > max(best.values(), default=-math.inf):
        raise AmbiguousNamesError(
            "the most likely first token starts more than one option name, so it tells them apart no better than noise"
        )

    if not best:
        return Readout([1.0 / len(labels)] * len(labels), list(labels), True, False, sampled, {}, method)

    missing_labels = [lab for lab in labels if lab not in best]
    truncated = False
    lps = dict(best)
    if missing_labels and missing == "floor":
        floor = min(lp for lp in returned if math.isfinite(lp)) if any(map(math.isfinite, returned)) else -math.inf
        for lab in missing_labels:
            lps[lab] = floor
        truncated = True
    top = max(lps.values())
    if top == -math.inf:
        return Readout([1.0 / len(labels)] * len(labels), list(labels), True, truncated, sampled, best, method)
    weights = [math.exp(lps[lab] - top) if lab in lps else 0.0 for lab in labels]
    total = sum(weights)
    return Readout([w / total for w in weights], missing_labels, False, truncated, sampled, best, method)


# --- JSON readouts: structured, discrete, ratings (System 2) -----------------------------------

_THINK = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_INTEGRAL = re.compile(r"^\s*[+-]?\d+(\.0*)?\s*$")


def divide_prior(probs: Sequence[float], prior: Sequence[float]) -> list[float]:
    """Content-free calibration: divide by what the model answers to an empty state, renormalise.

    A small model's label distribution leans to some options whatever the state (the first one
    listed, a common word); the lean is measured on states that carry nothing and divided out.
    """
    scaled = [p / max(r, PRIOR_FLOOR) for p, r in zip(probs, prior)]
    total = sum(scaled)
    return [x / total for x in scaled] if total > 0 else list(probs)


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
    field_name = {"choice": "choice", "score": "score", "noul": "noul"}[kind]
    _exact_keys(obj, [field_name], "the object")
    v = obj[field_name]
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
