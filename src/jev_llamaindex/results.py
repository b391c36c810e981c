"""What a selection hands back: the result with its distribution, the event it emits, the low-confidence error."""

from __future__ import annotations

from typing import Literal

from llama_index.core.base.base_selector import MultiSelection, SingleSelection
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation.events import BaseEvent

from jev_shared import JevError, SystemOneResponse

__all__ = ["JevSelectorResult", "JevSelectionEvent", "LowConfidenceError", "selector_result"]


class JevSelectorResult(MultiSelection):
    """A ``SelectorResult`` that also carries the distribution it was read from.

    ``RouterQueryEngine`` puts it in ``response.metadata["selector_result"]``.
    """

    #: The option key of each candidate, by index: its tool name, or ``choice_1``... when names are missing.
    keys: list[str] = Field(default_factory=list)
    #: Probability per key: a distribution for ``question="choice"``; independent P(relevant) for ``"noul"``.
    probabilities: dict[str, float] = Field(default_factory=dict)
    #: The choice answer's confidence; None for per-candidate nouls.
    confidence: float | None = None
    question: Literal["choice", "noul"] = "choice"
    #: The readout method that answered (``logprobs``, ``structured``, ...), from the engine's response.
    method: str | None = None
    #: Why the selection differs from the plain pick (a fallback), or None.
    note: str | None = None
    #: The engine's whole response: answers, usage, debug.
    response: SystemOneResponse | None = Field(default=None, repr=False)

    @property
    def distribution(self) -> list[float]:
        """The probabilities in candidate order (index i is choice i)."""
        return [self.probabilities[k] for k in self.keys]


class JevSelectionEvent(BaseEvent):
    """Emitted through LlamaIndex instrumentation on every selection (also one that then raises)."""

    selector: str
    query_str: str
    result: JevSelectorResult

    @classmethod
    def class_name(cls) -> str:
        return "JevSelectionEvent"


class LowConfidenceError(JevError):
    """The pick's confidence is below ``min_confidence`` and there is no ``default_index`` to fall back to."""

    def __init__(self, message: str, *, result: JevSelectorResult) -> None:
        self.result = result
        super().__init__(message)


def selector_result(keys: list[str], resp: SystemOneResponse, probs: dict[str, float], picked: list[int],
                    reasons: list[str], *, confidence: float | None, question: Literal["choice", "noul"],
                    note: str | None, method_id: str) -> JevSelectorResult:
    """The result for ``picked``; ``method`` is ``method_id``'s, else the first question's (a noul per candidate)."""
    first = next(iter(resp.answers), None)
    method = resp.method_of(method_id) or (resp.method_of(first) if first is not None else None)
    return JevSelectorResult(
        selections=[SingleSelection(index=i, reason=r) for i, r in zip(picked, reasons)],
        keys=keys, probabilities=probs, confidence=confidence, question=question,
        method=method, note=note, response=resp,
    )
