"""Redact credentials from anything that reaches debug output, logs or error texts."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

SECRET_KEYS = re.compile(r"(authorization|api[-_]?key|x-api-key|secret|token|password|cookie|organization)$", re.I)
SECRET_VALUES = re.compile(r"(sk-[A-Za-z0-9_-]{8,}|(?:Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,})", re.I)
#: A URL's ``user:password@`` (the password redacted, and the user with it).
URL_USERINFO = re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+@")
REDACTED = "[REDACTED]"
#: Credentials the clients carry (``remember_secrets``), redacted from every text whatever their shape;
#: the most recent are kept. Shorter values are left: they would redact ordinary words.
MAX_KNOWN, MIN_SECRET_CHARS = 256, 8
_known: dict[str, None] = {}
_known_lock = threading.Lock()


def remember_secrets(values: Iterable[str]) -> None:
    """Redact these from every text from now on (a client's keys, header values, URL password)."""
    with _known_lock:
        for value in values:
            if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS:
                _known.pop(value, None)
                _known[value] = None
        while len(_known) > MAX_KNOWN:
            del _known[next(iter(_known))]


def _secrets_first_longest(secrets: tuple[str, ...]) -> list[str]:
    with _known_lock:
        every = set(_known) | {s for s in secrets if s}
    return sorted(every, key=len, reverse=True)  # "user:password" before "password"
#: Keys that look secret but carry none (token counts, logprob tokens).
_SAFE = {"token", "max_tokens", "prompt_tokens", "completion_tokens", "total_tokens", "input_tokens",
         "output_tokens", "cached_tokens", "reasoning_tokens", "max_output_tokens", "top_logprobs"}


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with key-shaped strings, and each of ``secrets`` (the client's own keys), replaced."""
    for secret in _secrets_first_longest(secrets):
        text = text.replace(secret, REDACTED)
    return URL_USERINFO.sub(REDACTED + "@", SECRET_VALUES.sub(REDACTED, text))


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
