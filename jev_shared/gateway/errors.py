"""Every failure as an HTTP status and a typed JSON body: ``{"error": {type, message, ...}}``.

The engine's errors say how they are reported (``code``, ``status_hint``, ``wire_error``), so this
module only adds what is the gateway's own: its errors (``ApiError``), Retry-After, and the
framing of a throttling or timed-out backend. ``field`` is the dotted path from the request body's
root (``questions.spam.criteria``), which the engine's own ``api="systemone"`` client reads back.
Messages pass through :func:`jev_shared.redact.redact`, and never carry the caller's key.
"""

from __future__ import annotations

import math
from typing import Any

from jev_shared import JevError, ProviderError, wire_error
from jev_shared.redact import redact


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


class UnknownModelError(LookupError):
    """The request names a model the gateway does not serve."""

    def __init__(self, model: str, known: list[str]):
        self.model = model
        super().__init__(f"the gateway serves no model {model!r}; it serves {known}")


def from_exception(exc: BaseException, retry_after_s: int = 1) -> ApiError:
    """Map an engine (or gateway) error onto its status, as the error itself hints."""
    if isinstance(exc, ApiError):
        return exc
    if isinstance(exc, UnknownModelError):
        return ApiError(404, "model_not_found", str(exc), field="model")
    if not isinstance(exc, JevError):
        return ApiError(500, "internal_error", f"the gateway failed: {type(exc).__name__}")
    err = wire_error(exc)
    status, headers = exc.status_hint, {}
    if isinstance(exc, ProviderError) and exc.code == "rate_limited":
        wait = max(1, math.ceil(exc.retry_after_s)) if exc.retry_after_s is not None else retry_after_s
        err["message"] = f"the backend is throttling: {exc.provider_message}"
        headers["retry-after"] = str(wait)
    elif isinstance(exc, ProviderError) and exc.code == "backend_timeout":
        err["message"] = f"a backend call timed out: {exc}"
    return ApiError(status, err["type"], err["message"], question_id=err.get("question_id"),
                    field=err.get("field"), headers=headers)
