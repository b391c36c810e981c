"""An allow / ask / block band for a yes/no decision, with its thresholds chosen from labelled answers.

A gate or a tool guard asks one noul ("this call should run") and acts on P(true): allow at or above
``allow``, block below ``block``, ask a person in between. :meth:`Band.fit` chooses the two thresholds
from labelled answers of that question for a target a user can state:

* ``max_error=0.02``: decide alone only where the labelled answers show at most 2% errors: ``allow`` is
  the lowest threshold whose allowed answers are wrong at most ``max_error`` of the time, counted
  conservatively as ``(errors + 1) / (allowed + 1)`` (the split conformal correction: a new answer is
  one more draw); ``block`` alike from below; everything between is asked.
* ``ask_rate=0.1``: ask a person about the 10% least certain answers (P(true) nearest 0.5), decide
  the rest.

The band reports what it expects on new answers drawn like the labelled ones: the share asked and the
error among allowed and among blocked answers, cross-fitted (each tenth of the labelled answers judged
by thresholds chosen on the other nine; a band judged on the answers it was chosen on flatters itself). Like decision sets
(:mod:`decision_sets`), this holds on average over answers exchangeable with the labelled ones; it says
nothing for one answer, nor for traffic unlike the labelled set.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from .answers import Answer
from .decision_sets import MIN_ANSWERS, Probabilities, Truth, distribution, truth_key

Outcome = Literal["allow", "ask", "block"]
#: How many folds the expected ask rate and error are cross-fitted over (:func:`_expected`).
FOLDS = 10


@dataclass(frozen=True)
class Band:
    """Allow at P(true) >= ``allow``, block below ``block``, ask between; with what the fit expects."""

    allow: float
    block: float
    #: The share of labelled answers in the ask band [block, allow).
    ask_rate: float
    #: The share of wrong answers among those allowed (P(true) >= allow but false), and among blocked.
    allow_error: float
    block_error: float
    n: int
    #: What was asked for: "max_error=0.02" or "ask_rate=0.1".
    target: str

    @classmethod
    def fit(cls, answers: Sequence[Answer | Probabilities], truths: Sequence[Truth], *,
            max_error: float | None = None, ask_rate: float | None = None) -> Band:
        """Choose the thresholds for ``max_error`` or for ``ask_rate`` (exactly one) on labelled nouls."""
        if (max_error is None) == (ask_rate is None):
            raise ValueError("Band.fit: give exactly one target, max_error= or ask_rate=")
        target = max_error if max_error is not None else ask_rate
        assert target is not None
        if not 0.0 < target < 1.0:
            raise ValueError(f"{'max_error' if max_error is not None else 'ask_rate'}: must be strictly between "
                             f"0 and 1, got {target!r}")
        if len(answers) != len(truths):
            raise ValueError(f"answers and truths differ in length ({len(answers)} != {len(truths)})")
        if len(answers) < MIN_ANSWERS:
            raise ValueError(f"a band needs at least {MIN_ANSWERS} labelled answers, got {len(answers)}")
        ps = [distribution(a).get("true") for a in answers]
        if any(p is None for p in ps):
            raise ValueError("Band.fit: every answer must be a yes/no (noul) answer or its P(true)")
        ys = [truth_key(t) == "true" for t in truths]
        probs = [float(p) for p in ps if p is not None]
        allow, block = _thresholds(probs, ys, max_error, ask_rate)
        name = f"max_error={max_error}" if max_error is not None else f"ask_rate={ask_rate}"
        return cls(allow, block, *_expected(probs, ys, max_error, ask_rate), n=len(probs), target=name)

    def outcome(self, p_true: float) -> Outcome:
        """What the band does with one answer's P(true)."""
        return "allow" if p_true >= self.allow else "block" if p_true < self.block else "ask"

    def judge(self, answers: Sequence[Answer | Probabilities], truths: Sequence[Truth]) -> tuple[float, float, float]:
        """(ask rate, error among allowed, error among blocked) on other labelled answers."""
        probs = [distribution(a)["true"] for a in answers]
        return _judge(probs, [truth_key(t) == "true" for t in truths], self.allow, self.block)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        return (f"allow at P(true) >= {self.allow:.3f}, block below {self.block:.3f}, ask between "
                f"({self.target} on {self.n} labelled answers: expected ask rate {self.ask_rate:.1%}, "
                f"error {self.allow_error:.1%} among allowed, {self.block_error:.1%} among blocked)")


def _thresholds(probs: Sequence[float], ys: Sequence[bool], max_error: float | None,
                ask_rate: float | None) -> tuple[float, float]:
    """(allow, block) for the target, chosen on these answers."""
    if max_error is None:
        assert ask_rate is not None
        return _for_ask_rate(probs, ask_rate)
    allow = _for_error(probs, ys, max_error, above=True)
    low = _for_error(probs, [not y for y in ys], max_error, above=False)
    block = min(0.0 if low is None else math.nextafter(low, 1.0), 1.0 if allow is None else allow)
    return 1.0 if allow is None else allow, block


def _expected(probs: Sequence[float], ys: Sequence[bool], max_error: float | None,
              ask_rate: float | None) -> tuple[float, float, float]:
    """(ask rate, error among allowed, among blocked) to expect on new answers: cross-fitted over
    ``FOLDS`` folds, each judged by thresholds chosen on the others. Why: thresholds chosen on the answers
    they are then judged by look better there than they will be (on the public sets, an ask rate 2-4
    points too low); ten folds choose on nine tenths, nearly as many answers as the band itself."""
    if len(probs) < FOLDS * 2:
        return _judge(probs, ys, *_thresholds(probs, ys, max_error, ask_rate))
    folds = [list(range(k, len(probs), FOLDS)) for k in range(FOLDS)]
    asked = wrong_allowed = allowed = wrong_blocked = blocked = 0.0
    for judge in folds:
        fit = [i for i in range(len(probs)) if i % FOLDS != judge[0] % FOLDS]
        allow, block = _thresholds([probs[i] for i in fit], [ys[i] for i in fit], max_error, ask_rate)
        for i in judge:
            if probs[i] >= allow:
                allowed += 1
                wrong_allowed += not ys[i]
            elif probs[i] < block:
                blocked += 1
                wrong_blocked += ys[i]
            else:
                asked += 1
    return asked / len(probs), wrong_allowed / max(allowed, 1), wrong_blocked / max(blocked, 1)


def _for_error(probs: Sequence[float], right: Sequence[bool], max_error: float, *, above: bool) -> float | None:
    """The P(true) furthest from the end (``above``: the lowest, counting answers at or above it; else the
    highest, counting those at or below) whose answers are wrong at most ``max_error`` of the time,
    counted as (errors + 1) / (kept + 1); None when no threshold is."""
    order = sorted(range(len(probs)), key=lambda i: -probs[i] if above else probs[i])
    best, errors = None, 0
    for rank, i in enumerate(order, start=1):
        errors += not right[i]
        last_of_tie = rank == len(order) or probs[order[rank]] != probs[i]
        if last_of_tie and (errors + 1) / (rank + 1) <= max_error:
            best = probs[i]
    return best


def _for_ask_rate(probs: Sequence[float], ask_rate: float) -> tuple[float, float]:
    """(allow, block) asking the ``ask_rate`` share of answers whose P(true) is nearest 0.5."""
    margins = sorted(abs(p - 0.5) for p in probs)
    m = round(ask_rate * len(margins))
    if m == 0:
        return 0.5, 0.5
    d = margins[min(m, len(margins)) - 1] + 1e-12
    return min(1.0, 0.5 + d), max(0.0, 0.5 - d)


def _judge(probs: Sequence[float], ys: Sequence[bool], allow: float, block: float) -> tuple[float, float, float]:
    allowed = [y for p, y in zip(probs, ys) if p >= allow]
    blocked = [y for p, y in zip(probs, ys) if p < block]
    asked = len(probs) - len(allowed) - len(blocked)
    return (asked / max(len(probs), 1), sum(not y for y in allowed) / max(len(allowed), 1),
            sum(blocked) / max(len(blocked), 1))


def band_for(labelled: Sequence[tuple[Answer | Probabilities, Truth]] | None, max_error: float | None,
             ask_rate: float | None) -> Band | None:
    """A door's band from its ``labelled=`` (pairs of answer or P(true), truth) and its target; None when
    neither is given. A target without labelled answers, or labelled answers without a target, is refused."""
    if labelled is None:
        if max_error is not None or ask_rate is not None:
            raise ValueError("max_error= / ask_rate= need labelled=: (answer or P(true), truth) pairs to fit on")
        return None
    if max_error is None and ask_rate is None:
        raise ValueError("labelled= needs a target: max_error= or ask_rate=")
    pairs = list(labelled)
    if not all(isinstance(p, tuple) and len(p) == 2 for p in pairs):
        raise ValueError("labelled: expected (answer or P(true), truth) pairs")
    return Band.fit([a for a, _ in pairs], [t for _, t in pairs], max_error=max_error, ask_rate=ask_rate)


__all__ = ["Band", "Outcome", "band_for"]
