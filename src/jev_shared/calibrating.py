"""Calibrating answers: the client's policy in one place (issue 33).

Every answer goes through the client's calibration (the shipped one for the model, or the caller's); under the
shipped one, a question whose examples show every option is then calibrated by its examples' own answers
(made once per prompt). ``debug["calibration"]`` says which applied to each question.
"""

from __future__ import annotations

from typing import Any

from . import calibration
from .answers import SystemOneResponse
from .calibration import GLOBAL, Calibrator
from .questions import Prepared
from .record import Record


def calibrated(cal: Calibrator, name: str, own_fits: dict[Any, Calibrator], preps: list[Prepared],
               records: list[Record], resp: SystemOneResponse) -> SystemOneResponse:
    """``resp`` with every answer calibrated; ``name`` is "shipped" or "custom", ``own_fits`` the client's cache."""
    answers, which = {}, {}
    for p, rec in zip(preps, records):
        key = cal.key_for(p.id, p.kind, bool(p.examples))
        ctx = calibration_context(p, rec)
        answers[p.id], which[p.id] = cal.apply(resp.answers[p.id], key, ctx), name
        if rec.labelled and name == "shipped":
            own = own_calibration(cal, key, p, rec, ctx, own_fits)
            answers[p.id], which[p.id] = own.apply(answers[p.id], GLOBAL), "examples"
    debug = {**(resp.debug or {}), "calibrated": True, "calibration": which}
    return resp.model_copy(update={"answers": answers, "debug": debug})


def own_calibration(cal: Calibrator, key: str, prep: Prepared, rec: Record, ctx: calibration.Context,
                    own_fits: dict[Any, Calibrator]) -> Calibrator:
    """The question's own fit on its labelled answers, made once per prompt (they do not change)."""
    labelled = rec.labelled or []
    ident = (key, prep.keys, tuple(tuple(probs) for probs, _ in labelled), tuple(lab for _, lab in labelled), ctx)
    if ident not in own_fits:
        own = calibration.examples_calibrator(cal, key, prep.keys, labelled, context=ctx)
        own.confidence = cal.confidence
        own_fits[ident] = own
    return own_fits[ident]


def calibration_context(prep: Prepared, rec: Record) -> calibration.Context:
    """What a feature-dependent calibration map reads besides the answer: the question's kind, its
    examples, and the prior its answer was divided by (with the floor the division used)."""
    from .readout import PRIOR_FLOOR, PRIOR_SHARE

    prior = tuple(rec.prior.values()) if rec.prior and len(rec.prior) == len(prep.keys) else None
    return calibration.Context(kind=prep.kind, examples=len(prep.examples), prior=prior,
                               prior_floor=max(PRIOR_FLOOR, PRIOR_SHARE / max(len(prep.keys), 1)))


__all__ = ["calibrated", "calibration_context", "own_calibration"]
