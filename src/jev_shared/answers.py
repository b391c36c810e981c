"""Answers: turn a distribution over candidate keys into the System One answer shape.

The last pipeline stage. ``model_dump()`` of a :class:`SystemOneResponse` is the System One
answer shape: score ``legend`` and ``probabilities`` keyed "0", "1", ...; no confidence on noul.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from .questions import Prepared

ConfidenceKind = Literal["peak", "entropy"]


def peak_confidence(probs: list[float]) -> float:
    """(n·p_max − 1)/(n − 1): the hosted API's reading; 0 for uniform, 1 for one-hot."""
    n = len(probs)
    if n <= 1:
        return 1.0
    return _clamp((n * max(probs) - 1.0) / (n - 1))


def entropy_confidence(probs: list[float]) -> float:
    """1 − H/ln n: the normalised-entropy reading of ``under-the-hood.txt``."""
    n = len(probs)
    if n <= 1:
        return 1.0
    h = -sum(p * math.log(p) for p in probs if p > 0)
    return _clamp(1.0 - h / math.log(n))


def confidence(probs: list[float], kind: ConfidenceKind = "peak") -> float:
    return peak_confidence(probs) if kind == "peak" else entropy_confidence(probs)


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))


class _Settable(BaseModel):
    """What decision sets (:mod:`decision_sets`) add to an answer, in memory only: never on the wire."""

    #: The options in the answer's conformal set, most probable first; None unless the client has ``sets=``.
    decision_set: list[str] | None = Field(default=None, exclude=True, repr=False)

    @property
    def abstains(self) -> bool:
        """True when the answer has a set and it is not one option (several, or none): do not decide alone."""
        return self.decision_set is not None and len(self.decision_set) != 1


class ChoiceAnswer(_Settable):
    model_config = ConfigDict(frozen=True)

    type: Literal["choice"] = "choice"
    choice: str
    probabilities: dict[str, float]
    confidence: float


class ScoreAnswer(_Settable):
    model_config = ConfigDict(frozen=True)

    type: Literal["score"] = "score"
    score: float
    legend: dict[str, str]
    probabilities: dict[str, float]
    confidence: float


class NoulAnswer(_Settable):
    model_config = ConfigDict(frozen=True)

    type: Literal["noul"] = "noul"
    noul: float

    @property
    def value(self) -> bool:
        """The verdict as a bool: true when P(true) >= 0.5."""
        return self.noul >= 0.5


Answer = Union[ChoiceAnswer, ScoreAnswer, NoulAnswer]


def plus_tokens(total: int | None, more: int | None) -> int | None:
    """A token count plus another; unknown (None) once either is: a count missing from one reply is not zero."""
    return None if total is None or more is None else total + more


class Usage(BaseModel):
    """What the call cost: tokens (None when a provider omits them), provider calls, latency."""

    input_tokens: int | None = 0
    output_tokens: int | None = 0
    n_calls: int = 0
    n_retries: int = 0
    latency_ms: float = 0.0

    def add_tokens(self, input_tokens: int | None, output_tokens: int | None) -> None:
        self.input_tokens = plus_tokens(self.input_tokens, input_tokens)
        self.output_tokens = plus_tokens(self.output_tokens, output_tokens)

    def merge(self, other: Usage) -> None:
        self.add_tokens(other.input_tokens, other.output_tokens)
        self.n_calls += other.n_calls
        self.n_retries += other.n_retries


class SystemOneResponse(BaseModel):
    """Answers keyed by question id, in question order."""

    model: str
    answers: dict[str, Answer]
    usage: Usage = Field(default_factory=Usage)
    #: The engine's account of the call, always set: ``methods`` and ``passes`` (which readout and
    #: pass answered each question), ``labels_missing``, ``no_signal``, ``truncated``, ``retry_reasons``, ...
    debug: dict[str, Any] = Field(default_factory=dict)

    def __getitem__(self, question_id: str) -> Answer:
        return self.answers[question_id]

    # Typed views by kind, as LangChain's ``ClassifierResponse`` has: ``resp.choices["team"].choice``
    # type-checks where ``resp.answers["team"]`` is the union. Properties, so ``model_dump()`` is unchanged.

    @property
    def choices(self) -> dict[str, ChoiceAnswer]:
        """The choice answers keyed by question id, in question order."""
        return {qid: a for qid, a in self.answers.items() if isinstance(a, ChoiceAnswer)}

    @property
    def scores(self) -> dict[str, ScoreAnswer]:
        """The score answers keyed by question id, in question order."""
        return {qid: a for qid, a in self.answers.items() if isinstance(a, ScoreAnswer)}

    @property
    def nouls(self) -> dict[str, NoulAnswer]:
        """The noul (yes/no) answers keyed by question id, in question order."""
        return {qid: a for qid, a in self.answers.items() if isinstance(a, NoulAnswer)}

    def method_of(self, question_id: str) -> str | None:
        """The readout method that answered the question (``logprobs``, ``structured``, …)."""
        return ((self.debug or {}).get("methods") or {}).get(question_id)

    def no_signal(self, question_id: str) -> bool:
        """True when no label was in the token window: the distribution is a uniform stand-in, not evidence.

        A gate or guard must not open on such an answer (P(true) = 0.5 would meet a 0.5 threshold)."""
        return question_id in ((self.debug or {}).get("no_signal") or ())


def normalise(values: list[float]) -> list[float]:
    """Scale non-negative weights to sum 1; all zero (or nothing) reads uniform."""
    total = sum(values)
    if not values:
        return []
    if total <= 0 or not math.isfinite(total):
        peak = max(values) if values else 0.0
        if peak > 0 and math.isfinite(peak):
            return normalise([v / peak for v in values])
        return [1.0 / len(values)] * len(values)
    return [v / total for v in values]


def build_answer(prep: Prepared, probs: list[float], kind: ConfidenceKind = "peak") -> Answer:
    """Distribution over ``prep.keys`` (in order) → the typed answer. Ties go to the first key."""
    probs = normalise([max(0.0, p) for p in probs])
    best = max(range(len(probs)), key=lambda i: (probs[i], -i))
    by_key = {k: p for k, p in zip(prep.keys, probs)}
    if prep.kind == "choice":
        return ChoiceAnswer(choice=prep.keys[best], probabilities=by_key, confidence=confidence(probs, kind))
    if prep.kind == "score":
        expected = sum(i * p for i, p in enumerate(probs))
        return ScoreAnswer(
            score=expected,
            legend=dict(zip(prep.keys, prep.descriptions)),
            probabilities=by_key,
            confidence=confidence(probs, kind),
        )
    return NoulAnswer(noul=by_key["true"])


def answer_confidence(answer: Answer) -> float:
    """One number for 'how sure': choice/score confidence, and max(p, 1 − p) for noul."""
    if isinstance(answer, NoulAnswer):
        return max(answer.noul, 1.0 - answer.noul)
    return answer.confidence
