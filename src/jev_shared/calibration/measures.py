"""Calibration metrics: accuracy, ECE, Brier and selective accuracy of labelled answers, the gate a
target precision asks for (with a Wilson margin), and the before/after report (:mod:`calibration`)."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .fit import Record, _argmax, nll

THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)


@dataclass
class Selective:
    """Accuracy among the answers whose top probability is at least ``threshold``."""

    threshold: float
    coverage: float
    accuracy: float | None
    n: int


@dataclass
class Metrics:
    n: int
    accuracy: float
    #: Expected calibration error: 10 equal-width bins of the top probability.
    ece: float
    #: Multi-class Brier score: mean of Σ_k (p_k − y_k)² (twice the binary one for yes/no).
    brier: float
    nll: float
    selective: list[Selective] = field(default_factory=list)


def metrics(records: Sequence[Record], thresholds: Sequence[float] = THRESHOLDS, bins: int = 10) -> Metrics:
    """Accuracy, ECE, Brier, NLL and selective accuracy of records as they stand."""
    n = len(records)
    if n == 0:
        return Metrics(0, 0.0, 0.0, 0.0, 0.0, [Selective(t, 0.0, None, 0) for t in thresholds])
    tops, hits, brier = [], [], 0.0
    for r in records:
        keys, probs = list(r.probabilities), list(r.probabilities.values())
        i = _argmax(probs)
        tops.append(probs[i])
        hits.append(keys[i] == r.label)
        brier += sum((p - (1.0 if k == r.label else 0.0)) ** 2 for k, p in zip(keys, probs))
    ece = 0.0
    for b in range(bins):
        idx = [j for j, c in enumerate(tops) if min(int(c * bins), bins - 1) == b]
        if idx:
            conf = sum(tops[j] for j in idx) / len(idx)
            acc = sum(hits[j] for j in idx) / len(idx)
            ece += len(idx) / n * abs(acc - conf)
    selective = []
    for t in thresholds:
        kept = [h for c, h in zip(tops, hits) if c >= t - 1e-12]
        selective.append(Selective(t, len(kept) / n, sum(kept) / len(kept) if kept else None, len(kept)))
    return Metrics(n, sum(hits) / n, ece, brier / n, nll(records), selective)


def ece_draws(records: Sequence[Record], draws: int = 200, seed: int = 0) -> list[float]:
    """The ECEs a perfectly calibrated model stating these probabilities reads on this many answers, each answer's
    truth drawn from its own probabilities, ``draws`` times (sorted)."""
    rng, eces = random.Random(seed), []
    for _ in range(draws):
        drawn = [Record(r.probabilities, rng.choices(list(r.probabilities), list(r.probabilities.values()))[0])
                 for r in records]
        eces.append(metrics(drawn, thresholds=()).ece)
    return sorted(eces)


def ece_band(records: Sequence[Record], quantile: float = 0.9, draws: int = 200, seed: int = 0) -> float:
    """What a perfectly calibrated model stating these probabilities reads as its ECE on this many answers, at
    ``quantile`` of :func:`ece_draws`. Why: on a few dozen answers an ECE is mostly noise, so a figure means something
    only beside this one (at 0.9, such a model reads above it one time in ten)."""
    eces = ece_draws(records, draws, seed)
    return eces[min(int(quantile * len(eces)), len(eces) - 1)] if eces else 0.0


#: How many standard errors below the measured precision a recommended threshold must still reach
#: its target: a threshold picked on the records it is judged by is optimistic (94% held out where
#: 95% was asked), so its precision's Wilson lower bound, not the precision itself, must reach it.
MARGIN_Z = 1.0


def wilson_lower(accuracy: float, n: int, z: float = MARGIN_Z) -> float:
    """The Wilson score interval's lower end for ``accuracy`` measured on ``n`` answers."""
    if n <= 0:
        return 0.0
    centre = accuracy + z * z / (2 * n)
    spread = z * math.sqrt(accuracy * (1 - accuracy) / n + z * z / (4 * n * n))
    return (centre - spread) / (1 + z * z / n)


def recommend_threshold(m: Metrics, target: float, min_count: int = 5, z: float = MARGIN_Z) -> float | None:
    """The lowest threshold whose selective accuracy reaches ``target`` on at least ``min_count`` answers,
    with ``z`` standard errors to spare (the Wilson lower bound; ``z=0`` is the measured accuracy)."""
    for s in m.selective:
        if s.accuracy is not None and s.n >= min_count and wilson_lower(s.accuracy, s.n, z) >= target:
            return s.threshold
    return None


@dataclass
class Comparison:
    """Metrics before and after calibration on one set of records, and the gate it suggests."""

    before: Metrics
    after: Metrics
    temperature: float
    threshold: float | None
    bias: dict[str, float] | None = None


@dataclass
class Report:
    target: float
    overall: Comparison
    per_question: dict[str, Comparison]

    def markdown(self) -> str:
        """A small table: one row per question id, then all."""
        rows = ["| question | n | T | offsets | accuracy before → after | ECE before → after | "
                "Brier before → after | gate (top p) |", "|---|---|---|---|---|---|---|---|"]
        for name, c in [*self.per_question.items(), ("all", self.overall)]:
            gate = "—" if c.threshold is None else f"{c.threshold:.2f}"
            offsets = ", ".join(f"{k} {v:+.1f}" for k, v in (c.bias or {}).items()) or "—"
            temp = f"{c.temperature:.2f}" + (" (fallback)" if name == "all" else "")
            rows.append(f"| {name} | {c.before.n} | {temp} | {offsets} | "
                        f"{c.before.accuracy:.0%} → {c.after.accuracy:.0%} | {c.before.ece:.3f} → {c.after.ece:.3f} | "
                        f"{c.before.brier:.3f} → {c.after.brier:.3f} | {gate} |")
        return "\n".join(rows)


def _metrics_from(d: Mapping[str, Any]) -> Metrics:
    return Metrics(**{**d, "selective": [Selective(**s) for s in d.get("selective", [])]})


def _comparison_from(d: Mapping[str, Any]) -> Comparison:
    return Comparison(_metrics_from(d["before"]), _metrics_from(d["after"]), d["temperature"], d["threshold"],
                      d.get("bias"))


def _report_from(d: Mapping[str, Any]) -> Report:
    return Report(d["target"], _comparison_from(d["overall"]),
                  {k: _comparison_from(v) for k, v in d["per_question"].items()})
