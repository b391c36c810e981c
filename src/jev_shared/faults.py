"""Faults: what a provider's error says about the request, read in one place.

A 4xx can refuse a request *field* (drop it and re-ask), refuse a field's *value* (never a
field refusal), or say the surface cannot carry logprobs at all. The structured fields of the
error body (``param``, ``code``, ``type``) are read first, the message second, since providers
word their messages freely.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .errors import LabelReadoutError, ProviderError
from .surfaces.registry import SURFACES

#: Fields a token method cannot do without: refusing one refuses the readout, not an option.
READOUT_FIELDS = ("logprobs", "top_logprobs", "include", "grammar")

_FIELD_REFUSAL = re.compile(
    r"is not supported|not supported|does not support|unrecognized request argument|extra inputs are not permitted|"
    r"cannot find field|unknown (field|parameter)|unsupported parameter|not permitted",
    re.IGNORECASE,
)
_VALUE_COMPLAINT = re.compile(r"must be (between|one of|at (least|most)|less|greater)|invalid '", re.IGNORECASE)
#: ``error.code`` values that refuse a parameter itself (OpenAI and compatible servers).
_FIELD_CODES = frozenset({"unsupported_parameter", "unknown_parameter", "unrecognized_parameter",
                          "invalid_parameter", "extra_forbidden"})
#: ``error.code`` values that refuse a parameter's value, not the parameter.
_VALUE_CODES = frozenset({"integer_above_max_value", "integer_below_min_value", "decimal_above_max_value",
                          "decimal_below_min_value", "invalid_value", "unsupported_value"})


def error_fields(exc: ProviderError) -> dict[str, str]:
    """``param``, ``code`` and ``type`` of the provider's error body, as strings ('' when absent)."""
    body = exc.body
    err = body.get("error", body) if isinstance(body, Mapping) else None
    if not isinstance(err, Mapping):
        return {"param": "", "code": "", "type": ""}
    return {k: str(err.get(k) or "") for k in ("param", "code", "type")}


def _client_error(exc: ProviderError) -> bool:
    return bool(exc.status_code) and 400 <= exc.status_code < 500  # type: ignore[operator]


def refused_field(exc: ProviderError, sent: list[str], surface: str) -> str | None:
    """The sent field a 4xx refuses by name (never a refused *value*), or None.

    ``sent`` are the request's field names (top level and extra body). On Responses the logprobs
    travel as ``include``, so a refusal that names logprobs refuses that.
    """
    if not _client_error(exc):
        return None
    info = error_fields(exc)
    if info["code"] in _VALUE_CODES:
        return None
    param = info["param"].split(".")[0].split("[")[0]
    if param and info["code"] in _FIELD_CODES:
        return _sent_name(param, sent, surface)
    message = exc.provider_message
    if not _FIELD_REFUSAL.search(message) or _VALUE_COMPLAINT.search(message):
        return None
    if param:
        name = _sent_name(param, sent, surface)
        if name:
            return name
    for name in sorted(sent, key=len, reverse=True):
        if re.search(rf"\b{re.escape(name)}\b", message):
            return name
    return _sent_name("logprobs", sent, surface) if "logprob" in message.lower() else None


def _sent_name(param: str, sent: list[str], surface: str) -> str | None:
    if param in sent:
        return param
    own = SURFACES[surface].logprobs_field if surface in SURFACES else param
    if param in ("logprobs", "top_logprobs") and own != "logprobs" and own in sent:
        return own
    return None


def logprobs_value_complaint(exc: ProviderError) -> bool:
    """A 4xx about a logprobs *value* (``top_logprobs`` above the server's cap): re-ask with structured."""
    if not _client_error(exc):
        return False
    info = error_fields(exc)
    about_logprobs = "logprob" in info["param"].lower() or "logprob" in exc.provider_message.lower()
    value = info["code"] in _VALUE_CODES or bool(_VALUE_COMPLAINT.search(exc.provider_message))
    return about_logprobs and value


def cannot_carry(exc: Exception) -> bool:
    """The surface, not the provider's health, failed the readout: no logprobs, or a 4xx about them."""
    if isinstance(exc, LabelReadoutError):
        return exc.provider_cannot
    if not isinstance(exc, ProviderError) or not _client_error(exc):
        return False
    if getattr(exc, "field", None) in READOUT_FIELDS:
        return True
    message = f"{error_fields(exc)['param']} {exc.provider_message}".lower()
    return "logprob" in message or "include" in message


def route_missing(exc: ProviderError, model: str) -> bool:
    """A 404 that does not name the model: the route, not the model, is missing."""
    return exc.status_code == 404 and model not in exc.provider_message


def sent_fields(kwargs: Mapping[str, Any]) -> list[str]:
    """A call's own field names: top level (less model and messages) and extra body."""
    sent = [k for k in kwargs if k not in ("model", "messages", "input", "extra_body")]
    return sent + list(kwargs.get("extra_body") or {})
