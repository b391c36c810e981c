"""Redact credentials from anything that reaches debug output, logs or error texts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

SECRET_KEYS = re.compile(r"(authorization|api[-_]?key|x-api-key|secret|token|password|cookie|organization)$", re.I)
SECRET_VALUES = re.compile(r"(sk-[A-Za-z0-9_-]{8,}|Bearer\s+[A-Za-z0-9._~+/=-]{8,})")
REDACTED = "[REDACTED]"
#: Keys that look secret but carry none (token counts, logprob tokens).
_SAFE = {"token", "max_tokens", "prompt_tokens", "completion_tokens", "total_tokens", "input_tokens",
         "output_tokens", "cached_tokens", "reasoning_tokens", "max_output_tokens", "top_logprobs"}


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with key-shaped strings, and each of ``secrets`` (the client's own keys), replaced."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    return SECRET_VALUES.sub(REDACTED, text)


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of ``value`` with secret-named keys and key-shaped strings replaced."""
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and k not in _SAFE and SECRET_KEYS.search(k) and isinstance(v, str)
                else redact(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [redact(v, secrets) for v in value]
    if isinstance(value, str):
        return redact_text(value, secrets)
    return value
