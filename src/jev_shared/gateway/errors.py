"""Every failure as an HTTP status and a typed JSON body: ``{"error": {type, message, ...}}``.

The engine's errors say how they are reported (``code``, ``status_hint``, ``wire_error``), so this
module only adds what is the gateway's own: its errors (``ApiError``), Retry-After, and the
framing of a throttling or timed-out backend. ``field`` is the dotted path from the request body's
root (``questions.spam.criteria``), which the engine's own ``api="systemone"`` client reads back.
Messages pass through :func:`jev_shared.redact.redact`, and never carry the caller's key.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from jev_shared import JevError, ProviderError, wire_error
from jev_shared.redact import redact


class Row(NamedTuple):
    status: int
    what: str


#: Every error type the gateway sends, with its status: the middlewares, the protocol and the routes raise
#: from it (:func:`api_error`), the engine's errors map onto it (``code`` and ``status_hint``), and the
#: OpenAPI document lists it (``routes._ERRORS``). tests/hostile/test_gateway_errors.py keeps them one.
ERRORS: dict[str, Row] = {
    "bad_request": Row(400, "a request that is not HTTP/1.1 the gateway can read, or with more than one Host header"),
    "invalid_encoding": Row(400, "a compressed body its Content-Encoding cannot read (corrupt, cut short, more than "
                                 "2 stacked codings or 16 gzip members / zstd frames)"),
    "unauthorized": Row(401, "missing or wrong bearer key"),
    "host_not_allowed": Row(403, "without keys: a Host that is not loopback (or --allowed-host)"),
    "model_not_found": Row(404, "a model the gateway does not serve"),
    "request_timeout": Row(408, "the request's body came too slowly (--body-timeout); the connection is closed"),
    "payload_too_large": Row(413, "a body, or its decoded form, over --max-body-bytes"),
    "unsupported_encoding": Row(415, "a Content-Encoding other than gzip, deflate, zstd"),
    "invalid_request": Row(422, "a body that is not the request shape (or not JSON, not UTF-8), named by field"),
    "invalid_question": Row(422, "a bad question or option, named by question id and field; nothing was sent"),
    "unsupported": Row(422, "a readout the backend does not support for this question"),
    "too_many_questions": Row(422, "more questions than --max-questions"),
    "overloaded": Row(429, "the gateway answers --max-in-flight requests already: see Retry-After"),
    "key_overloaded": Row(429, "the key holds --max-calls-per-key backend calls already: see Retry-After"),
    "rate_limited": Row(429, "the backend throttles: see Retry-After"),
    "internal_error": Row(500, "the gateway failed (a bug: the message names the exception class only)"),
    "unsupported_client": Row(500, "the engine's client cannot do what the request asks"),
    "backend_error": Row(502, "the backend failed or could not be reached"),
    "unreadable_answer": Row(502, "the backend's answer could not be read as the question's options"),
    "model_refusal": Row(502, "the model refused to answer"),
    "too_many_connections": Row(503, "more connections or requests than --max-connections (uvicorn's limit_concurrency: "
                                     "its plain-text 503, then closed); behind nginx, its limit_conn per address"),
    "backend_timeout": Row(504, "a backend call timed out"),
    "timeout": Row(504, "the request's total timeout passed"),
}


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


def api_error(type: str, message: str, **kw: Any) -> ApiError:
    """The ApiError of ``type``, its status read from :data:`ERRORS`."""
    return ApiError(ERRORS[type].status, type, message, **kw)


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
        return api_error("model_not_found", str(exc), field="model")
    if not isinstance(exc, JevError):
        return api_error("internal_error", f"the gateway failed: {type(exc).__name__}")
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
