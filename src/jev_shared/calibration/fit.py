"""Calibration data and fits: labelled records, temperature scaling and per-option offsets.

The temperature fit is a 1-D golden-section search on ``1/T`` (the NLL is convex there); the
offsets fit is a few Newton steps on a convex problem of at most 11 unknowns. No scipy.
:mod:`calibration` builds the ``Calibrator`` and the metrics on these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..answers import Answer, NoulAnswer, SystemOneResponse

#: A label the readout left at 0 (outside the top-logprobs window) is read as this small
#: probability, so its NLL stays finite and a temperature above 1 can give it some mass back.
FLOOR = 1e-9
T_MIN, T_MAX = 0.05, 20.0


@dataclass(frozen=True)
class Context:
    """What the engine knows about an answer besides its probabilities (all known at run time)."""

    kind: str = "choice"
    examples: int = 0
    #: The prior the answer was divided by (debias), in the answer's key order; None: not debiased.
    prior: tuple[float, ...] | None = None
    #: The floor ``readout.divide_prior`` applied to the prior (so the undivided window is exact).
    prior_floor: float = 1e-3


@dataclass(frozen=True)
class Record:
    """One labelled answer: its probabilities over the question's keys, the true key, the question id."""

    probabilities: dict[str, float]
    label: str
    question_id: str = ""
    #: What the engine knew about the answer (kind, examples, prior): read by a feature map (calibration.map).
    context: Context | None = None

    @classmethod
    def from_answer(cls, answer: Answer, label: str | int | bool, question_id: str = "") -> Record:
        """Noul labels may be bools or "true"/"false"/"yes"/"no"; score labels the level index."""
        probs = _probabilities(answer)
        key = _label_key(label, answer)
        if key not in probs:
            raise ValueError(f"label {label!r} is not one of the answer's keys {list(probs)}")
        return cls(probs, key, question_id)

    @classmethod
    def checked(cls, probabilities: Any, label: Any, question_id: Any = "") -> Record:
        """A record from values nothing has checked (a line of a file), or a ValueError saying what is wrong:
        ``probabilities`` an object of two or more options, each a number from 0 to 1 and not all 0; ``label``
        one of them (a boolean or 1/0 for a yes/no's "true"/"false", a score level's number, or the key itself);
        ``question_id`` a text or a number."""
        if not isinstance(probabilities, Mapping) or len(probabilities) < 2:
            raise ValueError(f"probabilities must be an object of two or more options, got {_short(probabilities)}")
        probs: dict[str, float] = {}
        for key, p in probabilities.items():
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:  # NaN fails it too
                raise ValueError(f"the probability of {key!r} must be a number from 0 to 1, got {_short(p)}")
            probs[str(key)] = float(p)
        if not any(probs.values()):
            raise ValueError("the probabilities are all 0: no answer to calibrate")
        if isinstance(question_id, bool) or not isinstance(question_id, (str, int)):
            raise ValueError(f"question_id must be a text, got {_short(question_id)}")
        return cls(probs, _checked_label(label, probs), str(question_id))


def _checked_label(label: Any, probs: Mapping[str, float]) -> str:
    """``label`` as one of the keys of ``probs``, else a ValueError."""
    if isinstance(label, bool) or (label in (0, 1) and set(probs) == {"true", "false"}):
        key = "true" if label else "false"
    elif isinstance(label, int):
        key = str(label)
    elif isinstance(label, str):
        low = label.strip().lower()
        yes_no = {"yes": "true", "no": "false", "true": "true", "false": "false"}
        key = yes_no[low] if label not in probs and set(probs) == {"true", "false"} and low in yes_no else label
    else:
        raise ValueError(f"the label must be a text, a boolean or a level's number, got {_short(label)}")
    if key not in probs:
        raise ValueError(f"the label {_short(label)} is not one of the options {_short(list(probs))}")
    return key


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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


def fit_temperature_toward(records: Sequence[Record], toward: float = 1.0, strength: float = 10.0,
                           lo: float = T_MIN, hi: float = T_MAX, iters: int = 60) -> float:
    """The temperature a few labelled answers earn, shrunk toward ``toward`` (maximum a posteriori).

    Why: a question's own examples are a handful of labelled answers, too few for a free fit (two
    examples of a yes/no question would drive T to an extreme). The summed NLL is penalised by
    ``strength/2 · (log T − log toward)²``, so ``toward`` (the shipped fit's verdict, 1 after it) counts
    for about ``strength`` answers and the examples move it only as far as they agree.
    """
    if not records:
        return toward
    rows = _log_rows(records)
    centre = -math.log(toward)

    def objective(u: float) -> float:
        return _nll(rows, math.exp(u)) * len(rows) + 0.5 * strength * (u - centre) ** 2

    a, b = -math.log(hi), -math.log(lo)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    fc, fd = objective(c), objective(d)
    for _ in range(iters):
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - g * (b - a)
            fc = objective(c)
        else:
            a, c, fc = c, d, fd
            d = a + g * (b - a)
            fd = objective(d)
    return math.exp(-(a + b) / 2)


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


def _logit(p: float) -> float:
    p = min(max(p, FLOOR), 1.0 - FLOOR)
    return math.log(p / (1.0 - p))


def rescale_top(probs: Sequence[float], slope: float, shift: float) -> list[float]:
    """Top-label scaling: the top probability p becomes σ(slope·logit p + shift), the others keep
    their ratios and share what is left. Never below the runner-up, so the answer stands."""
    i = _argmax(probs)
    rest = 1.0 - probs[i]
    if len(probs) < 2 or rest <= 0.0:
        return list(probs)
    second = max(p for j, p in enumerate(probs) if j != i)
    z = slope * _logit(probs[i]) + shift
    new = 1.0 / (1.0 + math.exp(-min(max(z, -700.0), 700.0)))  # a file's extreme numbers: 0 or 1, no overflow
    new = max(new, second / (rest + second) * (1.0 + 1e-9))  # the runner-up, rescaled, stays below
    return [new if j == i else p * (1.0 - new) / rest for j, p in enumerate(probs)]


def fit_top(records: Sequence[Record], l2: float = 0.5, iters: int = 50) -> tuple[float, float]:
    """(slope, shift) of :func:`rescale_top` by Newton's method on whether the top answer was right.

    Why: a temperature scales every answer's confidence alike, but a small model's reliability
    curve has a shape (timid at 0.6–0.8, where it is nearly always right; bold at 0.4): Platt
    scaling of the top probability fits that shape with two numbers that do not depend on the
    question's options, so a fit for a kind of question carries over to a user's own. ``l2`` pulls
    towards the identity (slope 1, shift 0) when records are few.
    """
    xs, ys = [], []
    for r in records:
        probs = list(r.probabilities.values())
        i = _argmax(probs)
        xs.append(_logit(probs[i]))
        ys.append(1.0 if list(r.probabilities)[i] == r.label else 0.0)
    a, b = 1.0, 0.0
    for _ in range(iters):
        ga, gb, haa, hab, hbb = l2 * (a - 1.0), l2 * b, l2, 0.0, l2
        for x, y in zip(xs, ys):
            q = 1.0 / (1.0 + math.exp(-(a * x + b)))
            ga, gb = ga + (q - y) * x, gb + (q - y)
            haa, hab, hbb = haa + q * (1 - q) * x * x, hab + q * (1 - q) * x, hbb + q * (1 - q)
        det = haa * hbb - hab * hab
        da, db = (hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det
        a, b = a - da, b - db
        if abs(da) + abs(db) < 1e-10:
            break
    return a, b


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
