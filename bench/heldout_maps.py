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
}
