"""Offline: the feature-dependent calibration maps tried on the public sets (bench/heldout_fit.py's FITS).

Each candidate is a small :class:`jev_shared.calibration.map.FeatureMap` (a temperature, or top-label
scaling, whose numbers depend on features the engine knows at run time for any question), fitted by
log loss on the records of the sets it is given; ``heldout_fit.loo`` judges each set by a fit on the
others. The names say the form and the features: ``T(log_k, examples)`` is a temperature that
depends on the number of options and on whether the question has examples.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jev_shared.calibration import GLOBAL, Calibrator, Record
from jev_shared.calibration.map import Context
from jev_shared.calibration.map_fit import Labelled, fit_temperature_map, fit_top_map

#: The ridge toward the identity map (in answers' worth of log loss): keeps weights the sets cannot pin
#: down near 0. Not tuned per candidate.
L2 = 1.0


def labelled(records: Sequence[Record]) -> list[Labelled]:
    return [(list(r.probabilities.values()), list(r.probabilities).index(r.label), r.context or Context())
            for r in records]


def _finish(cal: Calibrator, records: Sequence[Record]) -> Calibrator:
    """The gate for 95% precision, as every shipped calibration carries one."""
    report = cal.evaluate(records)
    cal.thresholds = {GLOBAL: report.overall.threshold}
    return cal


def temperature_map(features: Sequence[str]) -> Callable[[list[Record]], Calibrator]:
    """A temperature ``1 / exp(w · f)`` over ``"1"`` and ``features``."""
    def fit(records: list[Record]) -> Calibrator:
        fmap = fit_temperature_map(labelled(records), ("1", *features), l2=L2)
        return _finish(Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}, target=0.95), records)
    return fit


def top_map(slope: Sequence[str], shift: Sequence[str]) -> Callable[[list[Record]], Calibrator]:
    """Top-label scaling: ``σ((a · f)·logit p + (b · g))`` over ``"1"`` and the features given."""
    def fit(records: list[Record]) -> Calibrator:
        fmap = fit_top_map(labelled(records), ("1", *slope), ("1", *shift), l2=L2)
        return _finish(Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}, target=0.95), records)
    return fit


def correctness_map(features: Sequence[str], logit: bool = True, l2: float = L2) -> Callable[[list[Record]], Calibrator]:
    """A correctness model (issue 32): P(the top answer is right) by logistic regression on ``features``
    (and the top's logit when ``logit``); the top probability becomes it, the rest keep their ratios. The
    ``top`` form with the features in its shift: it ships in the same file."""
    def fit(records: list[Record]) -> Calibrator:
        fmap = fit_top_map(labelled(records), ("1",) if logit else (), ("1", *features), l2=l2)
        return _finish(Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}, target=0.95), records)
    return fit


#: The correctness model's inputs: the top's log probability, its margin over the runner-up, the answer's
#: spread, the number of options, the kind, examples, and how far the prior divided out leans (0: uniform).
CORRECT_FEATURES = ("log_top", "margin", "entropy", "log_k", "noul", "score", "examples", "prior_lean")


def _name(form: str, *groups: Sequence[str]) -> str:
    return form + "".join("(" + ", ".join(g) + ")" for g in groups)


#: The candidates: a temperature on the number of options and on examples, on the answer's spread,
#: on the prior's lean; top-label scaling with the same.
CANDIDATES: dict[str, Callable[[list[Record]], Calibrator]] = {
    _name("T", fs): temperature_map(fs) for fs in (
        ("log_k",), ("examples",), ("log_k", "examples"), ("noul", "score", "examples"), ("entropy",),
        ("raw_entropy",), ("log_k", "examples", "entropy"), ("log_k", "examples", "prior_entropy"),
        ("log_k", "examples", "shift"), ("entropy", "log_k"), ("entropy", "examples"), ("entropy", "prior_entropy"),
        ("entropy", "noul"), ("entropy", "log_k", "examples", "prior_entropy"))
} | {
    _name("top", sl, sh): top_map(sl, sh) for sl, sh in (
        ((), ()), ((), ("log_k",)), (("log_k",), ("log_k",)), ((), ("log_k", "examples")),
        (("log_k", "examples"), ("log_k", "examples")), ((), ("log_k", "examples", "entropy")),
        ((), ("log_k", "examples", "prior_entropy")), ((), ("log_k", "examples", "shift")),
        ((), ("noul", "score", "examples")), (("entropy",), ("entropy",)),
        ((), ("log_k", "examples", "prior_entropy", "entropy")))
} | {
    "P(right) on all": correctness_map(CORRECT_FEATURES, logit=False),
    "P(right) on logit + all": correctness_map(CORRECT_FEATURES),
    "P(right) on logit + spread + kind": correctness_map(("margin", "entropy", "noul", "score", "examples")),
    "P(right) on logit + all but the prior": correctness_map(CORRECT_FEATURES[:-1]),
    "P(right) on logit + all, prior_entropy for prior_lean": correctness_map((*CORRECT_FEATURES[:-1], "prior_entropy")),
    "P(right) on logit + all, ridge 10": correctness_map(CORRECT_FEATURES, l2=10.0),
    "P(right) on logit + all + debias moved": correctness_map((*CORRECT_FEATURES, "shift", "raw_entropy")),
}
