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

The temperature fit is a 1-D golden-section search on ``1/T`` (the NLL is convex there); the
offsets fit is a few Newton steps on a convex problem of at most 11 unknowns. No scipy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .answers import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse, confidence

#: A label the readout left at 0 (outside the top-logprobs window) is read as this small
#: probability, so its NLL stays finite and a temperature above 1 can give it some mass back.
FLOOR = 1e-9
THRESHOLDS = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95)
T_MIN, T_MAX = 0.05, 20.0
GLOBAL = "*"
FORMAT = "jev-calibration/1"


@dataclass(frozen=True)
class Record:
    """One labelled answer: its probabilities over the question's keys, the true key, the question id."""

    probabilities: dict[str, float]
    label: str
    question_id: str = ""

    @classmethod
    def from_answer(cls, answer: Answer, label: str | int | bool, question_id: str = "") -> Record:
        """Noul labels may be bools or "true"/"false"/"yes"/"no"; score labels the level index."""
        probs = _probabilities(answer)
        key = _label_key(label, answer)
        if key not in probs:
            raise ValueError(f"label {label!r} is not one of the answer's keys {list(probs)}")
        return cls(probs, key, question_id)


def _probabilities(answer: Answer) -> dict[str, float]:
    if isinstance(answer, NoulAnswer):
        return {"true": answer.noul, "false": 1.0 - answer.noul}
    return dict(answer.probabilities)


def _label_key(label: str | int | bool, answer: Answer) -> str:
    if isinstance(answer, NoulAnswer):
        if isinstance(label, str):
            low = label.strip().lower()
            return "true" if low in ("true", "yes") else "false" if low in ("false", "no") else low
        return "true" if label else "false"
    return str(label)


def records_from(response: SystemOneResponse, labels: Mapping[str, str | int | bool]) -> list[Record]:
    """Records for the questions of ``response`` that ``labels`` (question id → true answer) names."""
    return [Record.from_answer(response.answers[qid], lab, qid) for qid, lab in labels.items()]


# --- the maths -----------------------------------------------------------------------------------


def temper(probs: Sequence[float], temperature: float, offsets: Sequence[float] | None = None) -> list[float]:
    """``p_i^(1/T)`` renormalised (times ``exp(offset_i)`` when given), in log space, floored at :data:`FLOOR`."""
    logs = [math.log(max(p, FLOOR)) / temperature for p in probs]
    if offsets is not None:
        logs = [x + b for x, b in zip(logs, offsets)]
    top = max(logs)
    weights = [math.exp(x - top) for x in logs]
    total = sum(weights)
    return [w / total for w in weights]


def _argmax(probs: Sequence[float]) -> int:
    return max(range(len(probs)), key=lambda i: (probs[i], -i))  # ties go to the first key, as answers do


def _log_rows(records: Sequence[Record]) -> list[tuple[list[float], int]]:
    """Each record's floored log-probabilities and the index of its true label."""
    return [([math.log(max(p, FLOOR)) for p in r.probabilities.values()], list(r.probabilities).index(r.label))
            for r in records]


def _nll(rows: Sequence[tuple[list[float], int]], beta: float, offsets: Sequence[float] | None = None) -> float:
    total = 0.0
    for logs, y in rows:
        scaled = [beta * x for x in logs] if offsets is None else [beta * x + b for x, b in zip(logs, offsets)]
        top = max(scaled)
        total += top + math.log(sum(math.exp(x - top) for x in scaled)) - scaled[y]
    return total / max(len(rows), 1)


def nll(records: Sequence[Record], temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of the true labels under temperature ``temperature``."""
    return _nll(_log_rows(records), 1.0 / temperature)


def fit_temperature(records: Sequence[Record], lo: float = T_MIN, hi: float = T_MAX, iters: int = 60) -> float:
    """The T in [lo, hi] that minimises the NLL: golden-section search on ``1/T`` (convex there)."""
    if not records:
        return 1.0
    rows = _log_rows(records)
    a, b = 1.0 / hi, 1.0 / lo
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = _nll(rows, c), _nll(rows, d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = _nll(rows, c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = _nll(rows, d)
    return 1.0 / ((a + b) / 2)


def fit_temperature_bias(records: Sequence[Record], l2: float = 1.0, iters: int = 50) -> tuple[float, dict[str, float]]:
    """T and one offset per option (the first fixed at 0) minimising the NLL, by Newton's method.

    Why: a small model often leans to one option whatever the input (the first listed, or "no"),
    which a temperature cannot undo since it never moves the argmax. An offset per option is a
    learnt prior correction (Platt scaling, for yes/no), and may change the answer. ``l2`` (a
    ridge on the offsets) keeps them finite when an option never occurs in the records. All
    records must share one question's keys.
    """
    if not records:
        return 1.0, {}
    keys = list(records[0].probabilities)
    if any(list(r.probabilities) != keys for r in records):
        raise ValueError("offsets need records of one question (the same keys in the same order)")
    rows = _log_rows(records)
    k = len(keys)
    theta = [1.0] + [0.0] * (k - 1)  # 1/T, then offsets of keys[1:]

    def objective(th: list[float]) -> float:
        return _nll(rows, th[0], [0.0, *th[1:]]) * len(rows) + 0.5 * l2 * sum(b * b for b in th[1:])

    f = objective(theta)
    for _ in range(iters):
        grad = [0.0] * k
        hess = [[0.0] * k for _ in range(k)]
        for logs, y in rows:
            p = _softmax([theta[0] * x + b for x, b in zip(logs, [0.0, *theta[1:]])])
            phis = [[logs[j]] + [1.0 if i == j else 0.0 for i in range(1, k)] for j in range(k)]
            mean = [sum(p[j] * phis[j][d] for j in range(k)) for d in range(k)]
            for j in range(k):
                for d in range(k):
                    grad[d] += (p[j] - (1.0 if j == y else 0.0)) * phis[j][d]
                    for e in range(k):
                        hess[d][e] += p[j] * phis[j][d] * phis[j][e]
            for d in range(k):
                for e in range(k):
                    hess[d][e] -= mean[d] * mean[e]
        for d in range(1, k):
            grad[d] += l2 * theta[d]
            hess[d][d] += l2
        hess[0][0] += 1e-9
        step = _solve(hess, grad)
        t = 1.0
        while True:
            cand = [th - t * s for th, s in zip(theta, step)]
            cand[0] = min(max(cand[0], 1.0 / T_MAX), 1.0 / T_MIN)
            fc = objective(cand)
            if fc <= f or t < 1e-6:
                break
            t /= 2
        done = f - fc < 1e-10
        if fc <= f:
            theta, f = cand, fc
        if done:
            break
    return 1.0 / theta[0], dict(zip(keys, [0.0, *theta[1:]]))


def _softmax(xs: Sequence[float]) -> list[float]:
    top = max(xs)
    w = [math.exp(x - top) for x in xs]
    total = sum(w)
    return [v / total for v in w]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting (the systems here are at most 10 × 10)."""
    n = len(b)
    m = [row[:] + [b[i]] for i, row in enumerate(a)]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(m[r][c]))
        m[c], m[piv] = m[piv], m[c]
        if abs(m[c][c]) < 1e-300:
            continue
        for r in range(c + 1, n):
            f = m[r][c] / m[c][c]
            for j in range(c, n + 1):
                m[r][j] -= f * m[c][j]
    x = [0.0] * n
    for c in range(n - 1, -1, -1):
        x[c] = (m[c][n] - sum(m[c][j] * x[j] for j in range(c + 1, n))) / m[c][c] if abs(m[c][c]) > 1e-300 else 0.0
    return x


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


def recommend_threshold(m: Metrics, target: float, min_count: int = 5) -> float | None:
    """The lowest threshold whose selective accuracy reaches ``target`` on at least ``min_count`` answers."""
    for s in m.selective:
        if s.accuracy is not None and s.n >= min_count and s.accuracy >= target:
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


# --- the calibrator ------------------------------------------------------------------------------


class Calibrator:
    """Temperatures (one per question id, and a global fallback), optional per-option offsets,
    and the gate thresholds they earn."""

    def __init__(self, temperatures: Mapping[str, float] | None = None, thresholds: Mapping[str, float | None] | None = None,
                 *, biases: Mapping[str, Mapping[str, float]] | None = None, target: float = 0.9,
                 confidence: str = "peak", fit_report: Report | None = None) -> None:
        self.temperatures: dict[str, float] = dict(temperatures or {GLOBAL: 1.0})
        self.temperatures.setdefault(GLOBAL, 1.0)
        self.biases: dict[str, dict[str, float]] = {q: dict(b) for q, b in (biases or {}).items()}
        self.thresholds: dict[str, float | None] = dict(thresholds or {})
        self.target = target
        self.confidence = confidence
        self._report = fit_report

    @classmethod
    def fit(cls, records: Iterable[Record], *, per_question: bool = True, bias: bool = False, min_records: int = 20,
            target: float = 0.9, thresholds: Sequence[float] = THRESHOLDS, min_count: int = 5,
            confidence: str = "peak") -> Calibrator:
        """Fit a global T, and a T for each question id with at least ``min_records`` records.

        ``bias=True`` also fits an offset per option for those questions (see
        :func:`fit_temperature_bias`): it can fix a model's lean to one option, and so change
        answers, where a temperature alone never does. ``target`` is the selective accuracy the
        recommended gate thresholds must reach.
        """
        records = list(records)
        if not records:
            raise ValueError("calibration needs at least one labelled record")
        temps, biases = {GLOBAL: fit_temperature(records)}, {}
        if per_question:
            for qid, group in _groups(records).items():
                if len(group) < min_records:
                    continue
                if bias:
                    temps[qid], biases[qid] = fit_temperature_bias(group)
                else:
                    temps[qid] = fit_temperature(group)
        cal = cls(temps, biases=biases, target=target, confidence=confidence)
        report = cal.evaluate(records, thresholds=thresholds, min_count=min_count)
        cal.thresholds = {GLOBAL: report.overall.threshold}
        cal.thresholds.update({qid: c.threshold for qid, c in report.per_question.items()})
        cal._report = report
        return cal

    def temperature(self, question_id: str | None = None) -> float:
        return self.temperatures.get(question_id or GLOBAL, self.temperatures[GLOBAL])

    def offsets(self, question_id: str | None, keys: Sequence[str]) -> list[float] | None:
        """The question's per-option offsets in ``keys`` order, or None (no offsets fitted)."""
        b = self.biases.get(question_id or GLOBAL)
        return None if b is None else [b.get(k, 0.0) for k in keys]

    def threshold(self, question_id: str | None = None) -> float | None:
        """The recommended gate on the calibrated top probability (None: no threshold reaches the target)."""
        return self.thresholds.get(question_id or GLOBAL, self.thresholds.get(GLOBAL))

    def _temper(self, probabilities: Mapping[str, float], question_id: str | None) -> dict[str, float]:
        keys = list(probabilities)
        probs = temper(list(probabilities.values()), self.temperature(question_id), self.offsets(question_id, keys))
        return dict(zip(keys, probs))

    def calibrate(self, records: Iterable[Record]) -> list[Record]:
        """The records with their probabilities calibrated for their question."""
        return [Record(self._temper(r.probabilities, r.question_id), r.label, r.question_id) for r in records]

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

    def apply(self, obj: SystemOneResponse | Answer, question_id: str | None = None) -> Any:
        """A recalibrated copy: a response (each answer by its question id) or one answer."""
        if isinstance(obj, SystemOneResponse):
            answers = {qid: self.apply(a, qid) for qid, a in obj.answers.items()}
            return obj.model_copy(update={"answers": answers})
        if isinstance(obj, NoulAnswer):
            return obj.model_copy(update={"noul": self._temper(_probabilities(obj), question_id)["true"]})
        probabilities = self._temper(obj.probabilities, question_id)
        keys, probs = list(probabilities), list(probabilities.values())
        update: dict[str, Any] = {"probabilities": probabilities,
                                  "confidence": confidence(probs, self.confidence)}  # type: ignore[arg-type]
        if isinstance(obj, ChoiceAnswer):
            update["choice"] = keys[_argmax(probs)]
        elif isinstance(obj, ScoreAnswer):
            update["score"] = sum(i * p for i, p in enumerate(probs))
        return obj.model_copy(update=update)

    def gate(self, answer: Answer, question_id: str | None = None) -> bool:
        """True when the *calibrated* answer's top probability reaches the recommended threshold."""
        t = self.threshold(question_id)
        if t is None:
            return False
        return top_probability(self.apply(answer, question_id)) >= t

    # -- persistence ------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": FORMAT, "temperatures": self.temperatures, "biases": self.biases,
                             "thresholds": self.thresholds, "target": self.target, "confidence": self.confidence}
        if self._report is not None:
            d["report"] = asdict(self._report)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Calibrator:
        if d.get("format") != FORMAT:
            raise ValueError(f"not a calibration file (format {d.get('format')!r}, expected {FORMAT!r})")
        report = _report_from(d["report"]) if d.get("report") else None
        return cls(d["temperatures"], d.get("thresholds"), biases=d.get("biases"), target=d.get("target", 0.9),
                   confidence=d.get("confidence", "peak"), fit_report=report)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> Calibrator:
        return cls.from_dict(json.loads(Path(path).read_text()))


def top_probability(answer: Answer) -> float:
    """The answer's largest probability (for a noul, max(p, 1 − p)): what the gate thresholds are on."""
    if isinstance(answer, NoulAnswer):
        return max(answer.noul, 1.0 - answer.noul)
    return max(answer.probabilities.values())


def _group_index(records: Sequence[Record]) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        groups.setdefault(r.question_id, []).append(i)
    return groups


def _groups(records: Sequence[Record]) -> dict[str, list[Record]]:
    return {qid: [records[i] for i in idx] for qid, idx in _group_index(records).items()}


def _metrics_from(d: Mapping[str, Any]) -> Metrics:
    return Metrics(**{**d, "selective": [Selective(**s) for s in d.get("selective", [])]})


def _comparison_from(d: Mapping[str, Any]) -> Comparison:
    return Comparison(_metrics_from(d["before"]), _metrics_from(d["after"]), d["temperature"], d["threshold"],
                      d.get("bias"))


def _report_from(d: Mapping[str, Any]) -> Report:
    return Report(d["target"], _comparison_from(d["overall"]),
                  {k: _comparison_from(v) for k, v in d["per_question"].items()})


__all__ = ["Calibrator", "Record", "Report", "Comparison", "Metrics", "Selective", "records_from", "metrics",
           "fit_temperature", "fit_temperature_bias", "temper", "top_probability", "recommend_threshold"]
