"""One error family for every way a decision can fail.

Every error derives from :class:`JevError`, so ``except JevError`` catches them all; each
subclass names one failure a caller can act on differently. Each also says how a service would
report it (like h11's ``error_status_hint``): ``code``, a stable machine name (the System One
wire's ``error.type``), and ``status_hint``, the HTTP status it maps to. So an application (the
gateway, batch, a user's own service) classifies an error by asking it, never by importing
another application's table. ``wire_error(exc)`` is the ``{"type", "message", ...}`` object.
"""

from __future__ import annotations

from typing import Any


class JevError(Exception):
    """Base of every error this package raises."""

    #: The wire's ``error.type`` for this failure, and the HTTP status a service answers it with.
    code: str = "internal_error"
    status_hint: int = 500


class InvalidQuestionError(JevError, ValueError):
    """A question, its state or an option is unusable; raised before any request is sent."""

    code, status_hint = "invalid_question", 422

    def __init__(self, message: str, *, question_id: str | None = None, field: str | None = None):
        self.question_id = question_id
        self.field = field
        #: The message without the ``id.field:`` prefix (for a service that reports the field apart).
        self.reason = message
        where = ".".join(p for p in (question_id, field) if p)
        super().__init__(f"{where}: {message}" if where else message)


class UnsupportedMethodError(JevError, ValueError):
    """The method cannot run on the chosen surface or question; raised before any request."""

    code, status_hint = "unsupported", 422


class ClientCapabilityError(JevError, TypeError):
    """The client object lacks the surface the call needs (e.g. no ``chat.completions.create``)."""

    code = "unsupported_client"


class LabelReadoutError(JevError):
    """The token window could not be read as a distribution over the labels."""

    code, status_hint = "unreadable_answer", 502

    #: True when another turn cannot help: the provider reports no logprobs at all.
    provider_cannot: bool = False

    def __init__(self, message: str, *, provider_cannot: bool = False):
        self.provider_cannot = provider_cannot
        super().__init__(message)


class MalformedAnswerError(JevError):
    """A JSON answer that does not match the schema the method asked for."""

    code, status_hint = "unreadable_answer", 502


class ModelRefusalError(JevError):
    """The model refused, or the provider filtered the content; carries the provider's words."""

    code, status_hint = "model_refusal", 502

    def __init__(self, message: str, *, refusal: str | None = None):
        self.refusal = refusal
        super().__init__(message)


class IncompleteAnswerError(JevError):
    """The provider ran out of output tokens (or context) before the answer was complete."""

    code, status_hint = "unreadable_answer", 502

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(message)


class ProviderError(JevError):
    """The provider failed in a way no retry or fallback could recover from.

    The SDK's own exception is not chained (its text may echo a key); what a caller needs from it
    travels here: ``status_code``, ``retry_after_s`` (the server's Retry-After), ``timed_out``
    (a backend call ran past its own timeout) and the redacted ``provider_message``.
    """

    def __init__(self, message: str, *, status_code: int | None = None, attempts: list[Any] | None = None,
                 provider_message: str | None = None, body: Any = None, request_id: str | None = None,
                 n_retries: int = 0, retry_after_s: float | None = None, timed_out: bool = False):
        self.status_code = status_code
        self.attempts = attempts or []
        #: The provider's own words, without our framing.
        self.provider_message = provider_message if provider_message is not None else message
        self.body = body
        self.request_id = request_id
        self.n_retries = n_retries
        self.retry_after_s = retry_after_s
        self.timed_out = timed_out
        super().__init__(message)

    @property
    def code(self) -> str:  # type: ignore[override]
        if self.status_code == 429:
            return "rate_limited"
        return "backend_timeout" if self.timed_out and self.status_code is None else "backend_error"

    @property
    def status_hint(self) -> int:  # type: ignore[override]
        return {"rate_limited": 429, "backend_timeout": 504}.get(self.code, 502)


class FieldRefusedError(ProviderError):
    """The server refuses a request field that the method cannot do without (e.g. ``logprobs``)."""

    def __init__(self, message: str, *, field: str, status_code: int | None = None, **kw: Any):
        self.field = field
        super().__init__(message, status_code=status_code, **kw)


class DecisionTimeoutError(ProviderError, TimeoutError):
    """The call's total timeout ran out before every question was answered."""

    code, status_hint = "timeout", 504  # pyright: ignore[reportAssignmentType]  # fixed values replace ProviderError's properties


class MalformedReplyError(ProviderError):
    """A 200 whose body is not the JSON object the surface documents (HTML, not UTF-8, wrong types)."""


def wire_error(exc: BaseException) -> dict[str, Any]:
    """``{"type", "message", "question_id"?, "field"?}`` as a System One service reports ``exc``.

    The message is redacted; ``field`` is the dotted path from the request body's root
    (``questions.team.criteria``), which the engine's own ``api="systemone"`` client reads back.
    Anything that is not a :class:`JevError` is reported by its class name only.
    """
    from .redact import redact_text

    if not isinstance(exc, JevError):
        return {"type": "internal_error", "message": f"unexpected failure: {type(exc).__name__}"}
    err: dict[str, Any] = {"type": exc.code, "message": redact_text(str(exc))}
    if isinstance(exc, InvalidQuestionError):
        err["message"] = redact_text(exc.reason)
        if exc.question_id is not None:
            err["question_id"] = exc.question_id
        path = ".".join(p for p in ("questions", exc.question_id, exc.field) if p) if exc.question_id else exc.field
        if path:
            err["field"] = path
    return err
