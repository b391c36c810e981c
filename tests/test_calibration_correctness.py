"""The correctness model: P(the top answer is right) from what the engine knows, as a ``top`` map.

Why these tests: the model reads three features added for it (the top's log probability, its margin over
the runner-up, how far the prior divided out leans); a feature that read the wrong number, or a fit that
could not recover a known dependence on it, would still produce plausible probabilities. Each test
fails if one of them breaks.
"""

from __future__ import annotations

import math
import random

import pytest

from jev_shared.calibration import GLOBAL, Calibrator, Context, FeatureMap, Record
from jev_shared.calibration.map import FEATURES
from jev_shared.calibration.map_fit import fit_top_map


def test_the_correctness_features_read_the_answer_and_the_prior() -> None:
    probs, none = [0.1, 0.6, 0.3], Context(kind="choice")
    assert FEATURES["log_top"](probs, none) == pytest.approx(math.log(0.6))
    assert FEATURES["margin"](probs, none) == pytest.approx(0.3)
    assert FEATURES["prior_lean"](probs, none) == 0.0  # no prior divided out: no lean
    uniform = Context(kind="choice", prior=(0.2, 0.2, 0.2))  # a powered prior need not sum to 1
    assert FEATURES["prior_lean"](probs, uniform) == pytest.approx(0.0, abs=1e-12)
    lean = Context(kind="choice", prior=(0.8, 0.1, 0.1))
    h = -(0.8 * math.log(0.8) + 2 * 0.1 * math.log(0.1)) / math.log(3)
    assert FEATURES["prior_lean"](probs, lean) == pytest.approx(1.0 - h)
    half = Context(kind="choice", prior=tuple(p ** 0.5 for p in (0.8, 0.1, 0.1)))  # strength 0.5
    assert 0.0 < FEATURES["prior_lean"](probs, half) < FEATURES["prior_lean"](probs, lean)


def _answers(rng: random.Random, n: int, weights: dict[str, float]) -> list[tuple[list[float], int, Context]]:
    """Answers of 2–6 options whose top is right with probability σ(weights · features)."""
    out = []
    for _ in range(n):
        k = rng.randint(2, 6)
        probs = [rng.random() ** 2 for _ in range(k)]
        probs = [p / sum(probs) for p in probs]
        prior = tuple(rng.random() for _ in range(k)) if rng.random() < 0.7 else None
        ctx = Context(kind="choice", prior=prior)
        z = sum(w * FEATURES[f](probs, ctx) for f, w in weights.items())
        top = max(range(k), key=probs.__getitem__)
        right = rng.random() < 1.0 / (1.0 + math.exp(-z))
        out.append((probs, top if right else rng.choice([i for i in range(k) if i != top]), ctx))
    return out


def test_the_fit_recovers_a_known_correctness_model_and_the_file_keeps_it(tmp_path) -> None:  # noqa: ANN001
    truth = {"1": -1.0, "margin": 3.0, "prior_lean": -2.0, "log_top": 0.5}
    data = _answers(random.Random(7), 4000, truth)
    fmap = fit_top_map(data, (), tuple(truth), l2=0.1)
    for name, w in truth.items():
        assert fmap.shift[name] == pytest.approx(w, abs=0.6), name
    assert not fmap.slope  # no logit term: P(right) is the regression alone
    cal = Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap})
    cal.save(tmp_path / "cal.json")
    back = Calibrator.load(tmp_path / "cal.json")
    probs, ctx = {"a": 0.05, "b": 0.85, "c": 0.1}, Context(kind="choice", prior=(0.5, 0.3, 0.2))
    (out,) = back.calibrate([Record(probs, "b", GLOBAL, ctx)])
    z = sum(w * FEATURES[f](list(probs.values()), ctx) for f, w in fmap.shift.items())
    p_right = 1.0 / (1.0 + math.exp(-z))
    assert p_right > 0.1 / (0.15 + 0.1)  # above the floor (the runner-up rescaled), so the map sets it
    assert out.probabilities["b"] == pytest.approx(p_right, rel=1e-6)  # the top is P(right)
    rest = 1.0 - out.probabilities["b"]
    assert out.probabilities["a"] == pytest.approx(rest / 3) and out.probabilities["c"] == pytest.approx(rest * 2 / 3)


def test_a_correctness_map_reads_its_features_at_apply_time() -> None:
    fmap = FeatureMap("top", {}, {"1": 0.0, "margin": 4.0, "prior_lean": -3.0})
    wide, narrow = [0.8, 0.1, 0.1], [0.45, 0.4, 0.15]
    plain, leaning = Context(kind="choice"), Context(kind="choice", prior=(0.9, 0.05, 0.05))
    assert fmap(wide, plain)[0] == pytest.approx(1.0 / (1.0 + math.exp(-2.8)))
    assert fmap(wide, plain)[0] > fmap(narrow, plain)[0]  # a clear win is trusted more
    assert fmap(wide, leaning)[0] < fmap(wide, plain)[0]  # a leaning prior is trusted less
