"""One error family for every way a decision can fail.

Every error derives from :class:`JevError`, so ``except JevError`` catches them all; each
subclass names one failure a caller can act on differently.
"""

from __future__ import annotations

from typing import Any


class JevError(Exception):
    """Base of every error this package raises."""


class InvalidQuestionError(JevError, ValueError):
    """A question, its state or an option is unusable; raised before any request is sent."""

    def __init__(self, message: str, *, question_id: str | None = None, field: str | None = None):
        self.question_id = question_id
        self.field = field
        #: The message without the ``id.field:`` prefix (for a service that reports the field apart).
        self.reason = message
        where = ".".join(p for p in (question_id, field) if p)
        super().__init__(f"{where}: {message}" if where else message)


class UnsupportedMethodError(JevError, ValueError):
    """The method cannot run on the chosen surface or question; raised before any request."""


class ClientCapabilityError(JevError, TypeError):
    """The client object lacks the surface the call needs (e.g. no ``chat.completions.create``)."""


class LabelReadoutError(JevError):
    """The token window could not be read as a distribution over the labels."""

    #: True when another turn cannot help: the provider reports no logprobs at all.
    provider_cannot: bool = False

    def __init__(self, message: str, *, provider_cannot: bool = False):
        self.provider_cannot = provider_cannot
        super().__init__(message)


class MalformedAnswerError(JevError):
    """A JSON answer that does not match the schema the method asked for."""


class ModelRefusalError(JevError):
    """The model refused, or the provider filtered the content; carries the provider's words."""

    def __init__(self, message: str, *, refusal: str | None = None):
        self.refusal = refusal
        super().__init__(message)


class IncompleteAnswerError(JevError):
    """The provider ran out of output tokens (or context) before the answer was complete."""

    def __init__(self, message: str, *, field: str | None = None):
        self.field = field
        super().__init__(message)


class ProviderError(JevError):
    """The provider failed in a way no retry or fallback could recover from."""

    def __init__(self, message: str, *, status_code: int | None = None, attempts: list[Any] | None = None,
                 provider_message: str | None = None, body: Any = None, request_id: str | None = None,
                 n_retries: int = 0):
        self.status_code = status_code
        self.attempts = attempts or []
        #: The provider's own words, without our framing.
        self.provider_message = provider_message if provider_message is not None else message
        self.body = body
        self.request_id = request_id
        self.n_retries = n_retries
        super().__init__(message)


class FieldRefusedError(ProviderError):
    """The server refuses a request field that the method cannot do without (e.g. ``logprobs``)."""

    def __init__(self, message: str, *, field: str, status_code: int | None = None, **kw: Any):
        self.field = field
        super().__init__(message, status_code=status_code, **kw)


class DecisionTimeoutError(ProviderError, TimeoutError):
    """The call's total timeout ran out before every question was answered."""


class MalformedReplyError(ProviderError):
    """A 200 whose body is not the JSON object the surface documents (HTML, not UTF-8, wrong types)."""
