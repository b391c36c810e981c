"""Errors of the LangChain door; all derive from :class:`jev_shared.JevError`, so one ``except`` catches all."""

from __future__ import annotations

from typing import Any

from jev_shared import JevError


class RouteConfidenceError(JevError):
    """The router is less sure than ``min_confidence`` and has no ``default`` route to fall back on."""

    def __init__(self, message: str, *, decision: Any):
        self.decision = decision
        super().__init__(message)


class GateBlocked(JevError):
    """A gate (or guard) did not let its input through.

    ``probability`` is P(true) (None when the decision itself failed and ``error`` says why),
    ``question`` the gate's statement, ``input`` what was blocked.
    """

    def __init__(self, message: str, *, probability: float | None, question: str, input: Any,
                 threshold: float, error: str | None = None):
        self.probability = probability
        self.question = question
        self.input = input
        self.threshold = threshold
        self.error = error
        super().__init__(message)


class ToolCallBlocked(GateBlocked):
    """A guarded tool call was not allowed (``on_block="raise"``); the tool did not run."""

    def __init__(self, message: str, *, tool: str, arguments: dict[str, Any], probability: float | None,
                 question: str, threshold: float, error: str | None = None):
        self.tool = tool
        self.arguments = arguments
        super().__init__(message, probability=probability, question=question,
                         input={"tool": tool, "arguments": arguments}, threshold=threshold, error=error)


__all__ = ["RouteConfidenceError", "GateBlocked", "ToolCallBlocked"]
