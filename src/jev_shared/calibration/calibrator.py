"""The :class:`Calibrator`: temperatures, offsets, top-label scaling and feature maps fitted on labelled
answers, applied to answers, measured, saved and loaded (the package docstring says how to use it)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..answers import Answer, ChoiceAnswer, ConfidenceKind, NoulAnswer, ScoreAnswer, SystemOneResponse, confidence
from ..files import read_text
from .check import CalibrationFileError, check_calibration, located
from .fit import (
    Record,
    _argmax,
    _probabilities,
    fit_temperature,
    fit_temperature_bias,
    fit_temperature_toward,
    fit_top,
    rescale_top,
    temper,
)
from .map import Context, FeatureMap
from .measures import (
    THRESHOLDS,
    Comparison,
    Report,
    _report_from,
    metrics,
    recommend_threshold,
)

GLOBAL = "*"
#: /2 adds ``maps`` (map.FeatureMap per key); a file without maps is still written as /1,
#: and both are read.
FORMAT = "jev-calibration/1"
FORMAT_MAPS = "jev-calibration/2"
FORMATS = (FORMAT, FORMAT_MAPS)


# --- the calibrator ------------------------------------------------------------------------------


class Calibrator:
    """Temperatures (one per question id, and a global fallback), optional per-option offsets,
    top-label scaling and feature maps, and the gate thresholds they earn."""

    def __init__(self, temperatures: Mapping[str, float] | None = None, thresholds: Mapping[str, float | None] | None = None,
                 *, biases: Mapping[str, Mapping[str, float]] | None = None,
                 tops: Mapping[str, Sequence[float]] | None = None, target: float = 0.9,
                 confidence: ConfidenceKind = "peak", fit_report: Report | None = None,
                 maps: Mapping[str, FeatureMap] | None = None, base: Calibrator | None = None) -> None:
        self.temperatures: dict[str, float] = dict(temperatures or {GLOBAL: 1.0})
        self.temperatures.setdefault(GLOBAL, 1.0)
        self.biases: dict[str, dict[str, float]] = {q: dict(b) for q, b in (biases or {}).items()}
        #: Top-label scaling after the temperature, (slope, shift) per question id (:func:`rescale_top`).
        self.tops: dict[str, tuple[float, float]] = {q: (float(t[0]), float(t[1])) for q, t in (tops or {}).items()}
        #: After the temperature and top-label scaling: a map whose numbers depend on the answer's
        #: features (calibration.map), per key; GLOBAL's for every key without its own.
        self.maps: dict[str, FeatureMap] = dict(maps or {})
        self.thresholds: dict[str, float | None] = dict(thresholds or {})
        #: Applied first, by the answer's kind: the model's shipped calibration under a fit made on the answers it
        #: calibrated (``jev calibrate`` on labelled states), so a few labels adjust it rather than replace it.
        self.base: Calibrator | None = _unnested(base)
        self.target = target
        self.confidence: ConfidenceKind = confidence
        self._report = fit_report

    @classmethod
    def fit(cls, records: Iterable[Record], *, per_question: bool = True, bias: bool = False, top: bool = False,
            min_records: int = 20, target: float = 0.9, thresholds: Sequence[float] = THRESHOLDS, min_count: int = 5,
            confidence: ConfidenceKind = "peak", shrink: float = 0.0, base: Calibrator | None = None) -> Calibrator:
        """Fit a global T, and a T for each question id with at least ``min_records`` records (on the answers
        ``base`` calibrates, when given: the result applies ``base`` first, then what was fitted here).

        ``bias=True`` also fits an offset per option for those questions (see
        :func:`fit_temperature_bias`): it can fix a model's lean to one option, and so change
        answers, where a temperature alone never does. ``top=True`` then fits top-label scaling
        (:func:`fit_top`), which bends the reliability curve where one temperature cannot. ``target``
        is the selective accuracy the recommended gate thresholds must reach. ``shrink`` > 0 pulls each
        temperature toward 1 as if that many more answers agreed with the model as read
        (:func:`fit_temperature_toward`): thirty answers nearly all right otherwise sharpen every answer.
        """
        records = list(records)
        if not records:
            raise ValueError("calibration needs at least one labelled record")
        if base is not None:  # the same fit, made on the answers the base gives, applied after it
            return cls.fit(base.calibrate_by_kind(records), per_question=per_question, bias=bias, top=top,
                           min_records=min_records, target=target, thresholds=thresholds, min_count=min_count,
                           confidence=confidence, shrink=shrink).on(base)

        def temperature(group: list[Record]) -> float:
            return fit_temperature_toward(group, 1.0, shrink) if shrink > 0 else fit_temperature(group)

        temps, biases = {GLOBAL: temperature(records)}, {}
        if per_question:
            for qid, group in _groups(records).items():
                if len(group) < min_records:
                    continue
                if bias:
                    temps[qid], biases[qid] = fit_temperature_bias(group)
                else:
                    temps[qid] = temperature(group)
        cal = cls(temps, biases=biases, target=target, confidence=confidence)
        if top:
            cal.tops = {qid: fit_top(cal.calibrate(group)) for qid, group in
                        [(GLOBAL, records), *(_groups(records).items() if per_question else ())]
                        if qid == GLOBAL or qid in temps}
        report = cal.evaluate(records, thresholds=thresholds, min_count=min_count)
        cal.thresholds = {GLOBAL: report.overall.threshold}
        cal.thresholds.update({qid: c.threshold for qid, c in report.per_question.items()})
        cal._report = report
        return cal

    def on(self, base: Calibrator | None) -> Calibrator:
        """This fit applied after ``base`` (or alone, for None): for a fit made on answers ``base`` already gave, as
        ``jev calibrate`` fits on answers calibrated as shipped. A shallow copy; this one is left as it is."""
        twin = copy.copy(self)
        twin.base = _unnested(base)
        return twin

    def temperature(self, question_id: str | None = None) -> float:
        return self.temperatures.get(question_id or GLOBAL, self.temperatures[GLOBAL])

    def offsets(self, question_id: str | None, keys: Sequence[str]) -> list[float] | None:
        """The question's per-option offsets in ``keys`` order, or None (no offsets fitted)."""
        b = self.biases.get(question_id or GLOBAL)
        return None if b is None else [b.get(k, 0.0) for k in keys]

    def threshold(self, question_id: str | None = None) -> float | None:
        """The recommended gate on the calibrated top probability (None: no threshold reaches the target)."""
        return self.thresholds.get(question_id or GLOBAL, self.thresholds.get(GLOBAL))

    def _temper(self, probabilities: Mapping[str, float], question_id: str | None,
                context: Context | None = None) -> dict[str, float]:
        if self.base is not None:
            probabilities = _on_base(self.base, probabilities, question_id, context)
        keys = list(probabilities)
        probs = temper(list(probabilities.values()), self.temperature(question_id), self.offsets(question_id, keys))
        top = self.tops.get(question_id if question_id in self.temperatures else GLOBAL)  # with the T in use
        if top is not None:
            probs = rescale_top(probs, *top)
        fmap = self.maps.get(question_id or GLOBAL, self.maps.get(GLOBAL))
        if fmap is not None:
            probs = fmap(probs, context)
        return dict(zip(keys, probs))

    def calibrate_by_kind(self, records: Iterable[Record]) -> list[Record]:
        """The records calibrated as the engine looks a fit up: by the question id, else by the answer's kind (each
        record's context; ``calibrate`` reads the question id as the key itself)."""
        return [Record(_on_base(self, r.probabilities, r.question_id, r.context), r.label, r.question_id, r.context)
                for r in records]

    def calibrate(self, records: Iterable[Record]) -> list[Record]:
        """The records with their probabilities calibrated for their question (and context)."""
        return [Record(self._temper(r.probabilities, r.question_id, r.context), r.label, r.question_id, r.context)
                for r in records]

    def evaluate(self, records: Iterable[Record], *, thresholds: Sequence[float] = THRESHOLDS,
                 min_count: int = 5) -> Report:
        """Metrics before and after calibration on ``records`` (held-out ones, for an honest figure)."""
        records = list(records)
        after = self.calibrate(records)

        def compare(before_rs: list[Record], after_rs: list[Record], qid: str | None) -> Comparison:
            b, a = metrics(before_rs, thresholds), metrics(after_rs, thresholds)
            return Comparison(b, a, self.temperature(qid), recommend_threshold(a, self.target, min_count),
                              self.biases.get(qid) if qid else None)

        per_q = {}
        for qid, idx in _group_index(records).items():
            per_q[qid] = compare([records[i] for i in idx], [after[i] for i in idx], qid)
        return Report(self.target, compare(records, after, None), per_q)

    def report(self) -> Report:
        """The report made when fitting (on the fitting records)."""
        if self._report is None:
            raise ValueError("no fit report: this calibrator was not fitted here; use evaluate(records)")
        return self._report

    def fitted_keys(self) -> frozenset[str]:
        """Every key this calibrator has a fit for (a temperature, offsets, a top-label scaling or a map)."""
        return frozenset(self.temperatures) | set(self.biases) | set(self.tops) | set(self.maps)

    def key_for(self, question_id: str | None, kind: str, examples: bool = False) -> str:
        """The fit an answer uses: its question id's, else its kind's (``*choice+examples`` for a question
        asked with examples, then ``*choice``; ``*score``, ``*noul`` alike, as a calibration shipped for a
        model holds them), else the global one."""
        if question_id and (question_id in self.temperatures or question_id in self.biases):
            return question_id
        for key in ((f"*{kind}+examples",) if examples else ()) + (f"*{kind}",):
            if key in self.temperatures:
                return key
        return GLOBAL

    def apply(self, obj: SystemOneResponse | Answer, question_id: str | None = None,
              context: Context | None = None) -> Any:
        """A recalibrated copy: a response (each answer by its question id, else its kind) or one answer
        (``context``: what the engine knew about it, for a feature map; the client passes it)."""
        if isinstance(obj, SystemOneResponse):
            answers = {qid: self.apply(a, self.key_for(qid, a.type), Context(kind=a.type))
                       for qid, a in obj.answers.items()}
            return obj.model_copy(update={"answers": answers})
        if isinstance(obj, NoulAnswer):
            return obj.model_copy(update={"noul": self._temper(_probabilities(obj), question_id, context)["true"]})
        probabilities = self._temper(obj.probabilities, question_id, context)
        keys, probs = list(probabilities), list(probabilities.values())
        update: dict[str, Any] = {"probabilities": probabilities,
                                  "confidence": confidence(probs, self.confidence)}
        if isinstance(obj, ChoiceAnswer):
            update["choice"] = keys[_argmax(probs)]
        elif isinstance(obj, ScoreAnswer):
            update["score"] = sum(i * p for i, p in enumerate(probs))
        return obj.model_copy(update=update)

    def gate(self, answer: Answer, question_id: str | None = None, context: Context | None = None) -> bool:
        """True when the *calibrated* answer's top probability reaches the recommended threshold."""
        question_id = self.key_for(question_id, answer.type)
        t = self.threshold(question_id)
        if t is None:
            return False
        return top_probability(self.apply(answer, question_id, context or Context(kind=answer.type))) >= t

    # -- persistence ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": FORMAT_MAPS if self.maps else FORMAT, "temperatures": self.temperatures,
                             "biases": self.biases, "tops": {q: list(t) for q, t in self.tops.items()},
                             "thresholds": self.thresholds, "target": self.target, "confidence": self.confidence}
        if self.maps:
            d["maps"] = {q: m.to_dict() for q, m in self.maps.items()}
        if self.base is not None:
            d["base"] = {k: v for k, v in self.base.to_dict().items() if k != "report"}
        if self._report is not None:
            d["report"] = asdict(self._report)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibrator:
        if d.get("format") not in FORMATS:
            raise ValueError(f"not a calibration file (format {d.get('format')!r}, expected one of {FORMATS})")
        check_calibration(d)  # every number that changes an answer finite and in its range (a CalibrationFileError)
        report = _report_from(d["report"]) if d.get("report") else None
        maps = {q: FeatureMap.from_dict(m) for q, m in (d.get("maps") or {}).items()}
        return cls(d.get("temperatures"), d.get("thresholds"), biases=d.get("biases"), tops=d.get("tops"),
                   target=d.get("target", 0.9),
                   confidence=d.get("confidence", "peak"), fit_report=report, maps=maps, base=_base_from(d))

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibrator:
        """The file's calibration (a regular file, bounded: files.MAX_READ_BYTES), checked whole: a value that is
        not one is a ValueError naming the file and its line."""
        text = read_text(path)
        try:
            return cls.from_dict(json.loads(text))
        except CalibrationFileError as exc:
            raise located(str(path), text, exc) from None


def top_probability(answer: Answer) -> float:
    """The answer's largest probability (for a noul, max(p, 1 − p)): what the gate thresholds are on."""
    if isinstance(answer, NoulAnswer):
        return max(answer.noul, 1.0 - answer.noul)
    return max(answer.probabilities.values())


def _unnested(base: Calibrator | None) -> Calibrator | None:
    """``base``, refused where it has a base of its own (one level: the shipped calibration under a user's fit)."""
    if base is not None and base.base is not None:
        raise ValueError("a calibration's base cannot have a base of its own")
    return base


def _on_base(base: Calibrator, probabilities: Mapping[str, float], question_id: str | None,
             context: Context | None) -> dict[str, float]:
    """The base's calibration of an answer: its fit for the question id, else for the answer's kind (the context's)."""
    qid = question_id if question_id != GLOBAL else None
    key = base.key_for(qid, context.kind if context else "", bool(context and context.examples))
    return base._temper(probabilities, key, context)  # noqa: SLF001


def _base_from(d: Mapping[str, Any]) -> Calibrator | None:
    """A file's ``base`` (a calibration of its own, checked whole; a bad value named under ``base``), or None."""
    base = d.get("base")
    if base is None:
        return None
    if not isinstance(base, Mapping):
        raise CalibrationFileError(f"must be a calibration object, got {type(base).__name__}", ("base",))
    if base.get("base") is not None:
        raise CalibrationFileError("a base cannot have a base of its own", ("base", "base"))
    try:
        return Calibrator.from_dict(base)
    except CalibrationFileError as exc:
        raise CalibrationFileError(exc.reason, ("base", *exc.path)) from None
    except ValueError as exc:
        raise CalibrationFileError(str(exc), ("base",)) from None


def _group_index(records: Sequence[Record]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.question_id, []).append(i)
    return groups


def _groups(records: Sequence[Record]) -> dict[str, list[Record]]:
    return {qid: [records[i] for i in idx] for qid, idx in _group_index(records).items()}


__all__ = ["GLOBAL", "FORMAT", "FORMAT_MAPS", "FORMATS", "Calibrator", "top_probability"]
