"""Calibration from more than the top probability: a map whose numbers depend on what the engine knows.

Why: one temperature for every question treats a yes/no the model is timid on and a 77-option intent
question it is bold on alike. The engine knows, for any question and at run time, things that say
which kind of answer it is looking at: how many options (``log_k``), the kind, whether the question
has examples, how spread the answer is (``entropy``), how much the content-free or examples' prior
leaned (``prior_entropy``, ``prior_lean``), how far dividing it out moved the answer (``shift``), and
how clearly the top answer won (``log_top``, ``margin``: the correctness model's features). A map is a few
weights on those features, fitted by log loss on labelled answers of many public sets
(``bench/heldout_fit.py``), small enough to read in the shipped JSON.

Two forms, both of which only rescale (the argmax never moves, so accuracy never changes):

* ``temperature``: the label logits times ``exp(w · f)`` (a temperature that depends on the features);
* ``top``: top-label scaling, the top probability p becomes ``σ((a · f)·logit p + (b · f))`` and the
  others keep their ratios (:func:`.fit.rescale_top`).

``f`` always holds ``"1"`` (the constant). Pure Python: the fits are Newton steps on a handful of
unknowns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .fit import FLOOR, Context, _logit, rescale_top, temper

FORMS = ("temperature", "top")
#: The most a map's log-temperature is taken as (a temperature from e^-50 to e^50): a file's extreme but finite
#: numbers bend an answer all the way, never overflow.
MAX_LOG_T = 50.0


def _entropy(probs: Sequence[float]) -> float:
    """Entropy over log K: 0 for a certain answer, 1 for an even one."""
    k = len(probs)
    return -sum(p * math.log(p) for p in probs if p > 0) / math.log(k) if k > 1 else 0.0


def undivided(probs: Sequence[float], ctx: Context) -> list[float]:
    """The window's distribution before the prior was divided out (the answer itself when it was not)."""
    if not ctx.prior or len(ctx.prior) != len(probs):
        return list(probs)
    scaled = [p * max(r, ctx.prior_floor) for p, r in zip(probs, ctx.prior)]
    total = sum(scaled) or 1.0
    return [x / total for x in scaled]


def _shift(probs: Sequence[float], ctx: Context) -> float:
    """KL(answer ‖ undivided window): how far debias moved the answer."""
    raw = undivided(probs, ctx)
    return sum(p * math.log(max(p, FLOOR) / max(r, FLOOR)) for p, r in zip(probs, raw) if p > 0)


def _margin(probs: Sequence[float], ctx: Context) -> float:
    """The top probability minus the runner-up's: how clearly the answer won."""
    top = sorted(probs, reverse=True)
    return top[0] - top[1] if len(top) > 1 else 1.0


def _prior_lean(probs: Sequence[float], ctx: Context) -> float:
    """How far the prior divided out is from uniform: 1 − its entropy over log K, after renormalising
    (a partial division's prior is a power of the content-free one and does not sum to 1); 0 with none."""
    if not ctx.prior or len(ctx.prior) < 2:
        return 0.0
    total = sum(ctx.prior) or 1.0
    return 1.0 - _entropy([p / total for p in ctx.prior])


#: Feature name → its value for an answer (probabilities in key order) and its context.
FEATURES: dict[str, Callable[[Sequence[float], Context], float]] = {
    "1": lambda probs, ctx: 1.0,
    "log_k": lambda probs, ctx: math.log(max(len(probs), 2)),
    "examples": lambda probs, ctx: 1.0 if ctx.examples else 0.0,
    "noul": lambda probs, ctx: 1.0 if ctx.kind == "noul" else 0.0,
    "score": lambda probs, ctx: 1.0 if ctx.kind == "score" else 0.0,
    "entropy": lambda probs, ctx: _entropy(probs),
    "raw_entropy": lambda probs, ctx: _entropy(undivided(probs, ctx)),
    "prior_entropy": lambda probs, ctx: _entropy(ctx.prior) if ctx.prior else 1.0,
    "shift": _shift,
    "log_top": lambda probs, ctx: math.log(max(max(probs), FLOOR)),
    "margin": _margin,
    "prior_lean": _prior_lean,
}


def feature_values(names: Sequence[str], probs: Sequence[float], ctx: Context) -> list[float]:
    return [FEATURES[n](probs, ctx) for n in names]


def _dot(weights: Mapping[str, float], probs: Sequence[float], ctx: Context) -> float:
    return sum(w * FEATURES[n](probs, ctx) for n, w in weights.items())


@dataclass
class FeatureMap:
    """A fitted map: its form, and weights keyed by feature name (``slope``: on the logits or the top
    label's logit; ``shift``: the top label's intercept, the ``top`` form only)."""

    form: str
    slope: dict[str, float] = field(default_factory=lambda: {"1": 1.0})
    shift: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise ValueError(f"calibration map: form must be one of {FORMS}, got {self.form!r}")
        unknown = (set(self.slope) | set(self.shift)) - set(FEATURES)
        if unknown:
            raise ValueError(f"calibration map: unknown features {sorted(unknown)} (known: {sorted(FEATURES)})")

    def __call__(self, probs: Sequence[float], ctx: Context | None = None) -> list[float]:
        """The answer's probabilities, rescaled (never reordered)."""
        ctx = ctx or Context()
        if len(probs) < 2:
            return list(probs)
        if self.form == "temperature":
            return temper(probs, math.exp(-min(max(_dot(self.slope, probs, ctx), -MAX_LOG_T), MAX_LOG_T)))
        p = max(probs)
        z = _dot(self.slope, probs, ctx) * _logit(p) + _dot(self.shift, probs, ctx)
        return rescale_top(probs, 1.0, z - _logit(p))

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"form": self.form, "slope": self.slope}
        if self.shift:
            d["shift"] = self.shift
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> FeatureMap:
        return cls(d["form"], {k: float(v) for k, v in d.get("slope", {"1": 1.0}).items()},
                   {k: float(v) for k, v in d.get("shift", {}).items()})
