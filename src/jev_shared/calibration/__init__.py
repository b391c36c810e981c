"""Calibration: temperature scaling (and optional per-option offsets) fitted on labelled answers.

A model's label logprobs rank options well long before their *size* means anything: a small
model says 0.95 and is right 70% of the time. One temperature per question (or per client)
fixes most of that: the answer's probabilities become ``p_i^(1/T)`` renormalised, the same as
dividing the label logits by ``T`` (a softmax does not see the constant that turns logprobs into
logits, so the answer's own probabilities are all we need). ``T > 1`` softens an over-confident
model, ``T < 1`` sharpens a timid one; the argmax never changes, so accuracy does not either.

Small models also *lean*: to the first option listed, or to "no", whatever the input. With
``bias=True`` the fit adds one offset per option (``p_i^(1/T)·e^(b_i)`` renormalised; Platt
scaling for yes/no). That can change answers, so judge it on held-out records.

    records = [Record.from_answer(resp.answers["team"], "billing", "team"), ...]
    cal = Calibrator.fit(records)           # one T per question id, a global T as fallback
    print(cal.report().markdown())          # accuracy, ECE, Brier, selective accuracy, gate
    resp = cal.apply(client.system_one(state, questions))
    cal.save("calibration.json"); cal = Calibrator.load("calibration.json")

The package: :mod:`.fit` holds the records and the fits, :mod:`.measures` the measures (ECE,
Brier, selective accuracy, gate thresholds), :mod:`.calibrator` the :class:`Calibrator`, :mod:`.map` and
:mod:`.map_fit` the maps whose numbers depend on what the engine knows about each answer (the shipped
calibration for an embedded model is a temperature that depends on the answer's spread), and
:mod:`.check` a calibration file checked whole (every number that changes an answer finite and in its
range, a bad one named by its line), :mod:`.traffic` the offsets that divide a question's lean out, measured over
its unlabelled answers, :mod:`.policy` the client's policy in one place: which calibration applies (``fitted/<model>.json`` for
``calibrator="auto"``) and how a question's own examples refine it. The names below are the public ones.
"""
from .calibrator import FORMAT, FORMAT_MAPS, FORMATS, GLOBAL, Calibrator, top_probability
from .check import ANSWERING, CalibrationFileError, check_calibration, line_of, located, non_finite
from .fit import (
    Context,
    Record,
    fit_temperature,
    fit_temperature_bias,
    fit_temperature_toward,
    fit_top,
    nll,
    records_from,
    rescale_top,
    temper,
)
from .map import FeatureMap
from .measures import (
    THRESHOLDS,
    Comparison,
    Metrics,
    Report,
    Selective,
    ece_band,
    ece_draws,
    metrics,
    recommend_threshold,
    wilson_lower,
)
from .policy import EXAMPLES_STRENGTH, SHIPPED, examples_calibrator, resolve, shipped
from .traffic import MIN_STATES, fit_traffic, lean, states_short, traffic_offsets

__all__ = ["Calibrator", "Context", "FeatureMap", "shipped", "resolve", "examples_calibrator", "EXAMPLES_STRENGTH",
           "SHIPPED", "GLOBAL", "FORMAT", "FORMAT_MAPS", "FORMATS", "THRESHOLDS", "Record", "Metrics", "Selective",
           "Comparison", "Report", "ece_band", "ece_draws", "metrics", "recommend_threshold", "wilson_lower", "records_from", "temper",
           "fit_temperature", "fit_temperature_bias", "fit_temperature_toward", "fit_top", "rescale_top", "nll",
           "top_probability", "ANSWERING", "CalibrationFileError", "check_calibration", "line_of", "located",
           "non_finite", "fit_traffic", "lean", "traffic_offsets", "states_short", "MIN_STATES"]
