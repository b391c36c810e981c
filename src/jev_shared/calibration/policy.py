"""Calibration policy in one place: which calibration a client uses, and how it is applied.

A client's ``calibrator="auto"`` is the one fitted for its model (``fitted/<model>.json``, shipped in the wheel);
every answer goes through the client's calibration (that one, or the caller's); under the shipped one, a
question whose examples show every option is then calibrated by its examples' own answers (made once per
prompt, shrunk toward the shipped fit). ``debug["calibration"]`` says which applied to each question.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..answers import SystemOneResponse
from ..models import canonical
from ..questions import Prepared
from ..readout import PRIOR_FLOOR, PRIOR_SHARE
from ..record import Record as CallRecord
from .calibrator import GLOBAL, Calibrator
from .fit import Context, Record, fit_temperature_toward

#: Calibrations fitted on this project's labelled data, one file per model (``fitted/<model>.json``).
SHIPPED = Path(__file__).resolve().parent / "fitted"


def shipped(model: str) -> Calibrator | None:
    """The calibration shipped for ``model`` (the embedded default has one, in any spelling of its name), or None."""
    path = SHIPPED / f"{canonical(model)}.json"
    return Calibrator.load(path) if path.is_file() else None


def resolve(calibrator: Calibrator | str | None, model: str) -> Calibrator | None:
    """A client's ``calibrator=``: "auto" (the one shipped for the model, if any), None (off), or a Calibrator."""
    if calibrator is None or isinstance(calibrator, Calibrator):
        return calibrator
    if calibrator == "auto":
        return shipped(model)
    raise ValueError(f"calibrator: must be 'auto', None or a Calibrator, got {calibrator!r}")


#: How many labelled answers the shipped fit counts for against a question's own examples
#: (:func:`examples_calibrator`; chosen leave-one-dataset-out on the public sets' saved runs).
EXAMPLES_STRENGTH = 10.0


def examples_calibrator(cal: Calibrator, key: str, keys: Sequence[str],
                        labelled: Sequence[tuple[Sequence[float], str]],
                        strength: float = EXAMPLES_STRENGTH, context: Context | None = None) -> Calibrator:
    """A question's own calibration, applied after ``cal``: the temperature its examples' answers earn.

    Why: the shipped fit was made on other people's questions; a question whose examples show every
    option has its own labelled answers (each example asked with the others as its examples), so its
    stated confidence can be made to mean what it says on that user's data. Few examples move it
    little: the temperature is shrunk toward 1 (the shipped fit's verdict) as if ``strength`` more
    answers agreed with it.
    """
    recs = cal.calibrate([Record(dict(zip(keys, probs)), label, key, context) for probs, label in labelled])
    t = fit_temperature_toward([Record(r.probabilities, r.label, GLOBAL) for r in recs], 1.0, strength)
    return Calibrator({GLOBAL: t})


def calibrated(cal: Calibrator, name: str, own_fits: dict[Any, Calibrator], preps: list[Prepared],
               records: list[CallRecord], resp: SystemOneResponse) -> SystemOneResponse:
    """``resp`` with every answer calibrated; ``name`` is "shipped" or "custom", ``own_fits`` the client's cache.

    A calibration with a ``base`` (``jev calibrate``'s fit on answers calibrated as shipped) applies the base as the
    shipped calibration is applied, its examples' own fit included, then its own fit: the answers it was fitted on."""
    under: dict[str, str] = {}
    if cal.base is not None:
        resp = calibrated(cal.base, "shipped", own_fits, preps, records, resp)
        under, cal = dict((resp.debug or {}).get("calibration") or {}), cal.on(None)
    answers, which = {}, {}
    for p, rec in zip(preps, records):
        key = cal.key_for(p.id, p.kind, bool(p.examples))
        ctx = calibration_context(p, rec)
        answers[p.id] = cal.apply(resp.answers[p.id], key, ctx)
        which[p.id] = f"{name} on {under[p.id]}" if p.id in under else name
        if rec.labelled and name == "shipped":
            own = own_calibration(cal, key, p, rec, ctx, own_fits)
            answers[p.id], which[p.id] = own.apply(answers[p.id], GLOBAL), "examples"
    debug = {**(resp.debug or {}), "calibrated": True, "calibration": which}
    return resp.model_copy(update={"answers": answers, "debug": debug})


def own_calibration(cal: Calibrator, key: str, prep: Prepared, rec: CallRecord, ctx: Context,
                    own_fits: dict[Any, Calibrator]) -> Calibrator:
    """The question's own fit on its labelled answers, made once per prompt (they do not change)."""
    labelled = rec.labelled or []
    ident = (key, prep.keys, tuple(tuple(probs) for probs, _ in labelled), tuple(lab for _, lab in labelled), ctx)
    if ident not in own_fits:
        own = examples_calibrator(cal, key, prep.keys, labelled, context=ctx)
        own.confidence = cal.confidence
        own_fits[ident] = own
    return own_fits[ident]


def calibration_context(prep: Prepared, rec: CallRecord) -> Context:
    """What a feature-dependent calibration map reads besides the answer: the question's kind, its
    examples, and the prior its answer was divided by (with the floor the division used)."""
    prior = tuple(rec.prior.values()) if rec.prior and len(rec.prior) == len(prep.keys) else None
    return Context(kind=prep.kind, examples=len(prep.examples), prior=prior,
                   prior_floor=max(PRIOR_FLOOR, PRIOR_SHARE / max(len(prep.keys), 1)))


__all__ = ["SHIPPED", "EXAMPLES_STRENGTH", "shipped", "resolve", "examples_calibrator", "calibrated",
           "calibration_context", "own_calibration"]
