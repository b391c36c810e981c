"""Calibration from a question's own traffic: the lean its answers share, measured over the user's states.

A model adds the same lean to every state of a question, whatever the state says: to "yes", to the first
option, to the option the examples ended on. Averaged over many real states of that question, the answers'
distribution estimates that lean, and dividing it out (one offset per option, ``-log`` of the mean,
centred) is Batch Calibration (Zhou et al. 2023, "Batch Calibration: Rethinking Calibration for In-Context
Learning and Prompt Engineering"). It needs no label, only states the question was really asked about;
the offsets go in the same :class:`~.calibrator.Calibrator` file as a fitted temperature, so the library,
``jev decide`` and ``jev serve`` apply it alike.

With labels too, the temperature is fitted on the answers *after* the offsets, and the offsets are stored
divided by it (the calibrator computes ``log p / T + b``), so one file holds both.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .calibrator import GLOBAL, Calibrator
from .fit import Record, fit_temperature, fit_temperature_toward, temper

#: Below this many states a question's lean is not measured (its offsets would be noise): no offsets.
MIN_STATES = 20
#: A mean probability is floored here before its log, so an option the model never gives stays finite.
MEAN_FLOOR = 1e-4


def lean(distributions: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The mean distribution over ``distributions`` (one question's answers, keys in one order)."""
    if not distributions:
        raise ValueError("a lean needs at least one answer")
    keys = list(distributions[0])
    for i, d in enumerate(distributions):
        if list(d) != keys:
            raise ValueError(f"answer {i + 1} has the options {list(d)}, not the question's {keys}")
    return {k: sum(d[k] for d in distributions) / len(distributions) for k in keys}


def traffic_offsets(distributions: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """One offset per option that divides the question's lean out: ``-log(mean)``, centred on 0."""
    mean = lean(distributions)
    logs = {k: -math.log(max(p, MEAN_FLOOR)) for k, p in mean.items()}
    centre = sum(logs.values()) / len(logs)
    return {k: v - centre for k, v in logs.items()}


def divided(record: Record, offsets: Mapping[str, float]) -> Record:
    """The record's answer with the offsets applied (temperature 1), label and context kept."""
    keys = list(record.probabilities)
    probs = temper(list(record.probabilities.values()), 1.0, [offsets.get(k, 0.0) for k in keys])
    return Record(dict(zip(keys, probs)), record.label, record.question_id, record.context)


def fit_traffic(answers: Mapping[str, Sequence[Mapping[str, float]]], labelled: Sequence[Record] = (), *,
                min_states: int = MIN_STATES, min_labels: int = 20, target: float = 0.9,
                shrink: float = 0.0) -> Calibrator:
    """A calibrator from each question's states (``answers``: question id → its answers' distributions, the
    model's own, uncalibrated), and, where a question has ``min_labels`` labelled records, a temperature
    fitted on them after its offsets (``shrink`` > 0: pulled toward 1 as if that many more answers agreed). A
    question with fewer than ``min_states`` answers gets no offsets."""
    temps: dict[str, float] = {GLOBAL: 1.0}
    biases: dict[str, dict[str, float]] = {}
    for qid, dists in answers.items():
        if len(dists) < min_states:
            continue
        offsets = traffic_offsets(dists)
        mine = [divided(r, offsets) for r in labelled if r.question_id == qid]
        t = 1.0 if len(mine) < min_labels else fit_temperature_toward(mine, 1.0, shrink) if shrink > 0 else \
            fit_temperature(mine)
        temps[qid] = t
        biases[qid] = {k: v / t for k, v in offsets.items()}
    return Calibrator(temps, biases=biases, target=target)


def states_short(answers: Mapping[str, Sequence[Mapping[str, float]]], min_states: int = MIN_STATES) -> dict[str, int]:
    """The questions with too few answers for a lean, and how many more each needs."""
    return {qid: min_states - len(d) for qid, d in answers.items() if len(d) < min_states}
