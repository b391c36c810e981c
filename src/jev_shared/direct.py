"""Direct posts: the lean call path, through an HTTP client the engine's own SDK client was built over.

``LocalServer.client()`` builds its openai client over an HTTP client of its own (the SDK's public
``http_client=``, with the SDK's own defaults: ``openai.DefaultHttpxClient``) and puts it, with the base URL and
the headers it knows, in the client's :class:`~jev_shared.backend.Backend` as an :class:`HttpTarget`. The
transport then posts a registry route's JSON body with it: the bytes the SDK's ``post`` would send, the same
timeout, and an HTTP failure raised as one of the faults below, which carry what the SDK's exceptions carry
(status, body, response headers, message), so the transport classifies, retries and wraps them the same way.
The SDK's request and response machinery was about 40% of a one-question decision's CPU (bench/cpu.py).
A client the engine did not build (a user's own) has no target and keeps the SDK's ``post``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: The options a client may be built with and still be posted to directly: the rest (default headers, a
#: query, an organisation, a websocket base) change the request in ways only the SDK knows.
DIRECT_OPTIONS = frozenset({"timeout", "max_retries", "http_client"})


@dataclass(frozen=True, eq=False)
class HttpTarget:
    """An HTTP client (httpx's or httpx2's ``Client`` / ``AsyncClient``: what the SDK client posts with), the
    base URL it posts under (ending in ``/``) and the headers every request carries."""

    http: Any
    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    #: the SDK client's own base URL object (its copies share it): checked by identity before by text
    sdk_url: Any = None
    #: ``headers`` as the HTTP client's own kind (httpx's ``Headers``), built once: merging a plain dict
    #: normalises every name and value again on each request
    fixed_headers: Any = field(init=False, repr=False)
    #: route → its URL as the HTTP client's own kind, built once (parsing the URL text was ~5% of a post)
    urls: dict[str, Any] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        kind: Any = type(getattr(self.http, "headers", None))
        fixed = kind(self.headers) if kind.__name__ == "Headers" else self.headers
        object.__setattr__(self, "fixed_headers", fixed)

    @property
    def is_async(self) -> bool:
        return callable(getattr(self.http, "aclose", None))

    def url(self, route: str) -> Any:
        """The route's full URL, as the HTTP client's own ``URL`` where it has one (else the text)."""
        url = self.urls.get(route)
        if url is None:
            text = self.base_url + route.lstrip("/")
            kind: Any = type(getattr(self.http, "base_url", None))
            url = self.urls[route] = kind(text) if kind.__name__ == "URL" else text
        return url

    def serves(self, client: Any) -> bool:
        """Whether ``client`` (the SDK client or a copy sharing its HTTP client) still posts under this base URL.
        The value the SDK's ``base_url`` property returns is read first where it keeps it (the property imports
        a module on every read: ~3% of the engine's CPU per decision); anything else asks the property."""
        if getattr(client, "__dict__", {}).get("_base_url") is self.sdk_url is not None:
            return True
        base = getattr(client, "base_url", None)
        return base is not None and (base is self.sdk_url or str(base) == self.base_url)


def sdk_client(sdk: Any, http_default: Any, base_url: str, api_key: str, *, posts: Any = None,
               **kwargs: Any) -> tuple[Any, HttpTarget | None]:
    """``sdk(base_url=…, api_key=…, **kwargs)`` over an HTTP client of its own (``kwargs["http_client"]``, else
    ``http_default()``), and the target that posts as it would (with ``posts`` where given: another HTTP client
    with httpx's ``post``, e.g. the gateway's aiohttp one); no target when ``kwargs`` name other options."""
    if not DIRECT_OPTIONS.issuperset(kwargs):
        return sdk(base_url=base_url, api_key=api_key, **kwargs), None
    http = kwargs.pop("http_client", None) or http_default()
    client = sdk(base_url=base_url, api_key=api_key, http_client=http, **kwargs)
    headers = {"Accept": "application/json", "Content-Type": "application/json", "Authorization": f"Bearer {api_key}"}
    return client, HttpTarget(posts or http, str(client.base_url), headers, client.base_url)


class StatusFault(Exception):
    """A non-2xx reply, as the openai SDK reads it: ``status_code``, ``response``, ``body`` (the JSON error's
    ``error`` object, else the JSON, else the text) and the message ``Error code: N[ - the error's message]``."""

    def __init__(self, response: Any) -> None:
        self.response = response
        self.status_code: int = response.status_code
        message = f"Error code: {self.status_code}"
        body: Any = response.text.strip()
        try:
            body = json.loads(body)
        except ValueError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, Mapping) else None
            said = error.get("message") if isinstance(error, Mapping) else None
            if isinstance(said, str) and said:
                message += f" - {said}"
        self.body = body.get("error", body) if isinstance(body, Mapping) else body
        super().__init__(message)


class ConnectionFault(ConnectionError):
    """No reply: the connection failed or broke (the SDK's ``APIConnectionError``)."""


class TimeoutFault(TimeoutError):
    """No reply in time (the SDK's ``APITimeoutError``)."""


#: ``json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)``'s encoder, built once (dumps
#: builds one a call); the same text.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _request(target: HttpTarget, route: str, own_timeout: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """httpx's ``post`` arguments for a resource method's keywords: the body merged with ``extra_body`` and
    encoded as the SDK encodes it (compact, not ASCII-escaped, no NaN), ``extra_headers`` / ``extra_query``.
    ``kwargs`` is the caller's own ``**kwargs`` dict (fresh each call): it becomes the body."""
    body = kwargs
    timeout = body.pop("timeout", own_timeout)
    headers = body.pop("extra_headers", None)
    query = body.pop("extra_query", None)
    extra = body.pop("extra_body", None)
    if extra:
        body = {**body, **extra}
    data = _ENCODER.encode(body).encode()
    return {"url": target.url(route), "content": data, "params": query, "timeout": _timeout(target.http, timeout),
            "headers": {**target.headers, **headers} if headers else target.fixed_headers}


def _timeout(http: Any, value: Any) -> Any:
    """A timeout the HTTP client takes: a number or None as is, a ``Timeout`` of another httpx as its own kind."""
    if value is None or isinstance(value, (int, float)):
        return value
    own: Any = getattr(http, "timeout", None)
    if not hasattr(own, "as_dict") or isinstance(value, type(own)):
        return value
    return type(own)(**value.as_dict())


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(exc, TimeoutError) or any(cls.__name__ == "TimeoutException" for cls in type(exc).__mro__)


def _reason(exc: BaseException) -> BaseException:
    """What a failure to get a reply says happened: the exception, or what an HTTP library's timeout (httpx's
    ``TimeoutException``) was raised from. An adapter may word another library's errors as httpx's: the SDK's
    aiohttp transport (``openai.DefaultAioHttpClient``) raises a refused or dropped connection as httpx's
    ``ConnectTimeout`` from aiohttp's connection error (aiohttp's own timeouts subclass
    ``TimeoutError``); httpx raises its timeouts from httpcore's, and those from a ``TimeoutError`` or nothing."""
    while not isinstance(exc, TimeoutError) and _is_timeout(exc) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _fault(reason: BaseException) -> Exception:
    """A failure's :func:`_reason` as the SDK words it (a timeout, else a connection error); the fault is raised
    from the reason, so what reads its chain (``transport.timed_out``) meets no mislabelled timeout."""
    return TimeoutFault("Request timed out.") if _is_timeout(reason) else ConnectionFault("Connection error.")


def _content(response: Any) -> bytes:
    if not response.is_success:
        response.read()
        raise StatusFault(response)
    return response.content


def post(target: HttpTarget, route: str, own_timeout: Any, **kwargs: Any) -> bytes:
    """POST ``route`` the way the SDK client's ``post(route, body=kwargs, cast_to=bytes)`` would; the body's bytes."""
    request = _request(target, route, own_timeout, kwargs)
    try:
        response = target.http.post(**request)
    except Exception as exc:  # noqa: BLE001 - as the SDK: any failure to get a reply is a connection error
        reason = _reason(exc)
        raise _fault(reason) from reason
    return _content(response)


async def apost(target: HttpTarget, route: str, own_timeout: Any, **kwargs: Any) -> bytes:
    """:func:`post` over an async HTTP client."""
    request = _request(target, route, own_timeout, kwargs)
    try:
        response = await target.http.post(**request)
    except Exception as exc:  # noqa: BLE001
        reason = _reason(exc)
        raise _fault(reason) from reason
    if not response.is_success:
        await response.aread()
        raise StatusFault(response)
    return response.content


__all__ = ["ConnectionFault", "HttpTarget", "StatusFault", "TimeoutFault", "apost", "post", "sdk_client"]
