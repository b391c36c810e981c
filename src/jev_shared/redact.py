"""Redact credentials from anything that reaches debug output, logs or error texts (and find those a client carries)."""

from __future__ import annotations

import base64
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

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
#: ``_known`` longest first, rebuilt when it changes (not sorted again for every text: the gateway's access
#: line redacts about seven texts a request).
_known_sorted: tuple[str, ...] = ()


def remember_secrets(values: Iterable[str]) -> None:
    """Redact these from every text from now on (a client's keys, header values, URL password)."""
    with _known_lock:
        for value in values:
            if isinstance(value, str) and len(value) >= MIN_SECRET_CHARS:
                _known.pop(value, None)
                _known[value] = None
        while len(_known) > MAX_KNOWN:
            del _known[next(iter(_known))]
        global _known_sorted
        _known_sorted = tuple(sorted(_known, key=len, reverse=True))


def _secrets_first_longest(secrets: tuple[str, ...]) -> tuple[str, ...]:
    known = _known_sorted  # one read of a tuple swapped whole: no lock needed
    extra = [s for s in secrets if s and s not in _known]
    if not extra:
        return known
    return tuple(sorted({*known, *extra}, key=len, reverse=True))  # "user:password" before "password"


#: Keys that look secret but carry none (token counts, logprob tokens).
_SAFE = {"token", "max_tokens", "prompt_tokens", "completion_tokens", "total_tokens", "input_tokens",
         "output_tokens", "cached_tokens", "reasoning_tokens", "max_output_tokens", "top_logprobs"}


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` with key-shaped strings, and each of ``secrets`` (the client's own keys), replaced."""
    for secret in _secrets_first_longest(secrets):
        text = text.replace(secret, REDACTED)
    if not _may_hold_shapes(text):
        return text
    return URL_USERINFO.sub(REDACTED + "@", SECRET_VALUES.sub(REDACTED, text))


def _may_hold_shapes(text: str) -> bool:
    """Whether :data:`SECRET_VALUES` or :data:`URL_USERINFO` may match: each needs ``sk-``, ``bearer``, ``basic``
    or ``://`` in it, in any case. An ASCII text's lower case has one wherever they match (IGNORECASE pairs no two
    ASCII letters but a letter's cases); any other text is searched. Four substring searches rather than two regex
    scans of every text: the gateway's access line costs a third less."""
    if not text.isascii():
        return True
    low = text.lower()
    return "sk-" in low or "bearer" in low or "basic" in low or "://" in low


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


#: Header names whose values carry no credential (the SDKs' own platform headers start ``x-stainless-``).
PLAIN_HEADERS = frozenset({"accept", "accept-encoding", "connection", "content-type", "user-agent"})


def client_secrets(client: Any) -> tuple[str, ...]:
    """Every credential the client carries, so an echo of one is redacted whatever its shape: its keys,
    its header values (a proxy's token, a cookie: each part too), its base URL's ``user:password`` and the
    ``Basic`` credential httpx makes of it, its http client's cookies."""
    found = [v for v in (getattr(client, "api_key", None), getattr(client, "auth_token", None)) if isinstance(v, str)]
    http = getattr(client, "_client", None)  # the SDK's httpx client: headers and cookies of its own
    for headers in (_headers(client, "default_headers"), _headers(http, "headers")):
        for name, value in headers:
            if name.lower() not in PLAIN_HEADERS and not name.lower().startswith("x-stainless"):
                found += [value, *_parts(value)]
    cookies = getattr(http, "cookies", None)
    if cookies is not None:
        try:
            found += [str(v) for v in cookies.values()]
        except (TypeError, AttributeError, RuntimeError):
            pass
    found += _userinfo(getattr(client, "base_url", None))
    return tuple(dict.fromkeys(v for v in found if len(v) >= 6))


def _headers(obj: Any, name: str) -> list[tuple[str, str]]:
    try:
        items = getattr(obj, name, None)
        return [(str(k), v) for k, v in dict(items or {}).items() if isinstance(v, str)]
    except (TypeError, ValueError, AttributeError):
        return []


def _parts(value: str) -> list[str]:
    """A header value's pieces that may be echoed alone: ``Bearer X`` / ``Basic X``'s X, a cookie's values."""
    scheme, _, rest = value.partition(" ")
    parts = [rest.strip()] if rest and scheme.lower() in ("bearer", "basic", "token") else []
    return parts + [v.strip() for _, eq, v in (c.partition("=") for c in value.split(";")) if eq and v.strip()]


def _userinfo(url: Any) -> list[str]:
    """A base URL's ``user:password`` as sent (httpx makes it ``Authorization: Basic base64(user:password)``)."""
    if url is None:
        return []
    parts = urlsplit(str(url))
    if parts.password is None:
        return []
    pair = f"{unquote(parts.username or '')}:{unquote(parts.password)}"
    return [pair, unquote(parts.password), parts.password, base64.b64encode(pair.encode()).decode()]
