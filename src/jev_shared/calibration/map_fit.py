"""Fitting a :class:`.map.FeatureMap` by log loss on labelled answers (pure Python, Newton).

Why here and not in a numerical library: the unknowns are a handful of weights, the answers a few
thousand, and the engine's dependencies are openai, pydantic and tenacity only. Both objectives are
smooth; a ridge (``l2``) pulls the weights toward the identity map (no rescaling) so a feature the
data cannot pin down stays near 0 instead of wandering.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .fit import _solve
from .map import FLOOR, Context, FeatureMap, _logit, feature_values

#: A labelled answer for the fits: probabilities in key order, the true key's index, its context.
Labelled = tuple[Sequence[float], int, Context]
#: An objective at a point: its value, gradient and Hessian.
Parts = Callable[[list[float]], tuple[float, list[float], list[list[float]]]]


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))


def _newton(objective_parts: Parts, start: list[float], l2: float, iters: int = 40) -> list[float]:
    """Damped Newton on ``Σ loss + l2/2·|w − start|²``; ``objective_parts(w)`` gives (loss, grad, hess)."""
    w = list(start)

    def total(v: list[float]) -> tuple[float, list[float], list[list[float]]]:
        f, g, h = objective_parts(v)
        n = len(v)
        f += 0.5 * l2 * sum((a - b) ** 2 for a, b in zip(v, start))
        g = [gi + l2 * (a - b) for gi, a, b in zip(g, v, start)]
        h = [[h[i][j] + (l2 if i == j else 0.0) for j in range(n)] for i in range(n)]
        return f, g, h

    f, g, h = total(w)
    for _ in range(iters):
        step = _solve(h, g)
        t = 1.0
        while True:
            cand = [a - t * s for a, s in zip(w, step)]
            fc, gc, hc = total(cand)
            if fc <= f or t < 1e-4:
                break
            t /= 2
        if fc > f:
            break
        done = f - fc < 1e-9
        w, f, g, h = cand, fc, gc, hc
        if done:
            break
    return w


def fit_top_map(data: Sequence[Labelled], slope: Sequence[str] = ("1",), shift: Sequence[str] = ("1",),
                l2: float = 1.0) -> FeatureMap:
    """Top-label scaling whose slope and intercept depend on features: logistic regression of "the top
    answer was right" on ``[slope features × logit(top), shift features]``."""
    rows = []
    for probs, y, ctx in data:
        i = max(range(len(probs)), key=lambda j: (probs[j], -j))
        lt = _logit(probs[i])
        rows.append(([v * lt for v in feature_values(slope, probs, ctx)] + feature_values(shift, probs, ctx),
                     1.0 if i == y else 0.0))
    n = len(slope) + len(shift)

    def parts(w: list[float]) -> tuple[float, list[float], list[list[float]]]:
        f, g, h = 0.0, [0.0] * n, [[0.0] * n for _ in range(n)]
        for x, t in rows:
            q = _sigmoid(sum(a * b for a, b in zip(w, x)))
            f -= math.log(max(q if t else 1.0 - q, FLOOR))
            for i in range(n):
                g[i] += (q - t) * x[i]
                for j in range(n):
                    h[i][j] += q * (1.0 - q) * x[i] * x[j]
        return f, g, h

    start = [1.0 if name == "1" else 0.0 for name in slope] + [0.0] * len(shift)
    w = _newton(parts, start, l2)
    return FeatureMap("top", dict(zip(slope, w[:len(slope)])), dict(zip(shift, w[len(slope):])))


def fit_temperature_map(data: Sequence[Labelled], features: Sequence[str] = ("1",), l2: float = 1.0) -> FeatureMap:
    """A temperature that depends on features: the logits times ``exp(w · f)``, by the NLL of the true key."""
    rows = [([math.log(max(p, FLOOR)) for p in probs], y, feature_values(features, probs, ctx)) for probs, y, ctx in data]
    n = len(features)

    def parts(w: list[float]) -> tuple[float, list[float], list[list[float]]]:
        f, g, h = 0.0, [0.0] * n, [[0.0] * n for _ in range(n)]
        for logs, y, x in rows:
            beta = math.exp(sum(a * b for a, b in zip(w, x)))
            scaled = [beta * v for v in logs]
            top = max(scaled)
            e = [math.exp(v - top) for v in scaled]
            z = sum(e)
            q = [v / z for v in e]
            f += top + math.log(z) - scaled[y]
            mean = sum(a * b for a, b in zip(q, logs))
            var = sum(a * (b - mean) ** 2 for a, b in zip(q, logs))
            du = beta * (mean - logs[y])
            duu = beta * beta * var + max(du, 0.0)  # the positive part: a Hessian Newton can trust
            for i in range(n):
                g[i] += du * x[i]
                for j in range(n):
                    h[i][j] += duu * x[i] * x[j]
        return f, g, h

    w = _newton(parts, [0.0] * n, l2)
    return FeatureMap("temperature", dict(zip(features, w)))
