"""Every failure as an HTTP status and a typed JSON body: ``{"error": {type, message, ...}}``.

``field`` is the dotted path from the request body's root (``questions.spam.criteria``), which is
what the engine's own ``api="systemone"`` client reads back into ``InvalidQuestionError``'s
``question_id`` and ``field``; ``question_id`` is given on its own as well.
Messages pass through :func:`jev_shared.redact.redact`, and never carry the caller's key.
"""

from __future__ import annotations

import math
from typing import Any

from jev_shared import (
    DecisionTimeoutError,
    IncompleteAnswerError,
    InvalidQuestionError,
    LabelReadoutError,
    MalformedAnswerError,
    ModelRefusalError,
    ProviderError,
    UnsupportedMethodError,
)
from jev_shared.redact import redact

from .engines import UnknownModelError


class ApiError(Exception):
    """A failure ready for the wire."""

    def __init__(self, status: int, type: str, message: str, *, question_id: str | None = None,
                 field: str | None = None, headers: dict[str, str] | None = None) -> None:
        self.status, self.type, self.message = status, type, message
        self.question_id, self.field, self.headers = question_id, field, headers or {}
        super().__init__(message)

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"type": self.type, "message": redact(self.message)}
        if self.question_id is not None:
            err["question_id"] = self.question_id
        if self.field is not None:
            err["field"] = self.field
        return {"error": err}


def invalid_question(exc: InvalidQuestionError) -> ApiError:
    """The engine's own validation error: its reason, with the field as a path from the body's root."""
    message = exc.reason
    if exc.question_id is not None:
        path = ".".join(p for p in ("questions", exc.question_id, exc.field) if p)
    else:
        path = exc.field
    return ApiError(422, "invalid_question", message, question_id=exc.question_id, field=path)


def _timed_out(exc: BaseException) -> bool:
    """A backend call that ran past its own timeout (the openai SDK's, or a socket's)."""
    seen = exc
    for _ in range(8):
        if isinstance(seen, TimeoutError) or type(seen).__name__ in ("APITimeoutError", "ReadTimeout"):
            return True
        nxt = seen.__cause__ or seen.__context__
        if nxt is None:
            return False
        seen = nxt
    return False


def backend_retry_after(exc: BaseException) -> float | None:
    """The throttling backend's own Retry-After, found on the SDK error the engine wrapped."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return None
        headers = getattr(getattr(seen, "response", None), "headers", None)
        value = headers.get("retry-after") if headers is not None else None
        if value is not None:
            try:
                return float(value)
            except ValueError:
                return None
        seen = seen.__cause__ or seen.__context__
    return None


def from_exception(exc: BaseException, retry_after_s: int = 1) -> ApiError:
    """Map an engine (or gateway) error onto its status: 4xx the caller's, 5xx the backend's."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, InvalidQuestionError):
        return invalid_question(exc)
    if isinstance(exc, UnsupportedMethodError):
        return ApiError(422, "unsupported", str(exc))
    if isinstance(exc, UnknownModelError):
        return ApiError(404, "model_not_found", str(exc), field="model")
    if isinstance(exc, DecisionTimeoutError):
        return ApiError(504, "timeout", str(exc))
    if isinstance(exc, ProviderError):
        return _provider_error(exc, retry_after_s)
    if isinstance(exc, ModelRefusalError):
        return ApiError(502, "model_refusal", str(exc))
    if isinstance(exc, (LabelReadoutError, MalformedAnswerError, IncompleteAnswerError)):
        return ApiError(502, "unreadable_answer", str(exc))
    return ApiError(500, "internal_error", f"the gateway failed: {type(exc).__name__}")


def _provider_error(exc: ProviderError, retry_after_s: int) -> ApiError:
    if exc.status_code == 429:
        told = backend_retry_after(exc)
        wait = max(1, math.ceil(told)) if told is not None else retry_after_s
        return ApiError(429, "rate_limited", f"the backend is throttling: {exc.provider_message}",
                        headers={"retry-after": str(wait)})
    if exc.status_code is None and _timed_out(exc):
        return ApiError(504, "backend_timeout", f"a backend call timed out: {exc}")
    return ApiError(502, "backend_error", str(exc))
