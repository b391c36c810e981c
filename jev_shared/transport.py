"""Transport: call the client, retry transient faults, and hand back a plain-dict reply.

Transient faults (408, 409, 429, 5xx, connection errors, timeouts) are retried with exponential
backoff and jitter, honouring ``Retry-After`` / ``retry-after-ms``, via tenacity. The openai SDK's
own retries are switched off (``with_options(max_retries=0)``) so the two never multiply.
Anything else becomes a :class:`ProviderError` carrying the status code and the provider's words.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from .errors import ProviderError

TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    initial_s: float = 0.5
    max_s: float = 8.0


@dataclass
class Call:
    """One provider call: which surface method to invoke and with which keyword arguments."""

    surface: str
    kwargs: dict[str, Any]


@dataclass
class Reply:
    body: dict[str, Any]
    latency_ms: float
    n_retries: int = 0
    headers: dict[str, str] = field(default_factory=dict)


def to_dict(obj: Any) -> dict[str, Any]:
    """SDK objects (pydantic), raw SDK responses, mappings, and plain objects → dict."""
    if obj is None:
        return {}
    http = getattr(obj, "http_response", None)
    if http is not None:  # a with_raw_response reply: read the JSON body as sent
        return json.loads(http.content)
    if isinstance(obj, Mapping):
        return dict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    to = getattr(obj, "to_dict", None)
    if callable(to):
        return to()
    return dict(vars(obj))


def status_of(exc: BaseException) -> int | None:
    code = getattr(exc, "status_code", None)
    if code is None:
        code = getattr(getattr(exc, "response", None), "status_code", None)
    return code if isinstance(code, int) else None


def is_transient(exc: BaseException) -> bool:
    code = status_of(exc)
    if code is not None:
        return code in TRANSIENT_STATUS or code >= 500
    name = type(exc).__name__
    return isinstance(exc, (ConnectionError, TimeoutError)) or name in {
        "APIConnectionError",
        "APITimeoutError",
        "ConnectError",
        "ReadTimeout",
        "ConnectTimeout",
        "RemoteProtocolError",
    }


def retry_after_s(exc: BaseException | None) -> float | None:
    """The server's own wait, from retry-after-ms or retry-after (seconds), capped."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return min(float(ms) / 1000.0, MAX_RETRY_AFTER_S)
        s = headers.get("retry-after")
        if s is not None:
            return min(float(s), MAX_RETRY_AFTER_S)
    except (TypeError, ValueError):
        return None
    return None


def provider_message(exc: BaseException) -> str:
    """The provider's own words: the error body's message where there is one."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        err = body.get("error", body)
        if isinstance(err, Mapping) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(exc)


def _wait(policy: RetryPolicy):
    backoff = wait_exponential_jitter(initial=policy.initial_s, max=policy.max_s)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        told = retry_after_s(exc)
        return told if told is not None else backoff(state)

    return wait


def _wrap(exc: BaseException, retries: int) -> ProviderError:
    code = status_of(exc)
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    request_id = headers.get("x-typesafe-request-id") or headers.get("x-request-id") if headers else None
    said = provider_message(exc)
    return ProviderError(
        f"provider error{f' {code}' if code else ''}: {said}"
        + (f" (request id {request_id})" if request_id else "")
        + (f" (after {retries} retries)" if retries else ""),
        status_code=code, provider_message=said, body=getattr(exc, "body", None), request_id=request_id,
        n_retries=retries,
    )


def resolve(client: Any, surface: str):
    """The bound create method for a surface: chat.completions.create, responses.create, …"""
    if surface == "systemone":  # a plain POST through the client, so its base URL and key apply
        return lambda path, body: client.post(path, body=body, cast_to=object)
    obj = client
    for part in SURFACE_PATHS[surface][:-1]:
        obj = getattr(obj, part)
    # the openai SDK's raw-response twin skips building pydantic models we would only dump again
    raw = getattr(obj, "with_raw_response", None)
    create = getattr(raw, "create", None) if raw is not None else None
    return create if callable(create) else getattr(obj, SURFACE_PATHS[surface][-1])


SURFACE_PATHS = {
    "chat_completions": ("chat", "completions", "create"),
    "responses": ("responses", "create"),
    "messages": ("messages", "create"),
    "decisions": ("decisions", "create"),
    "systemone": ("post",),
}


def send(client: Any, call: Call, policy: RetryPolicy) -> Reply:
    create = resolve(client, call.surface)
    retries = 0

    def count(_: RetryCallState) -> None:
        nonlocal retries
        retries += 1

    start = time.perf_counter()
    try:
        for attempt in Retrying(
            stop=stop_after_attempt(policy.max_retries + 1),
            wait=_wait(policy),
            retry=retry_if_exception(is_transient),
            before_sleep=count,
            reraise=True,
        ):
            with attempt:
                raw = create(**call.kwargs)
    except Exception as exc:  # noqa: BLE001 - classified here, re-raised typed
        raise _wrap(exc, retries) from exc
    return Reply(to_dict(raw), (time.perf_counter() - start) * 1000.0, retries)


async def asend(client: Any, call: Call, policy: RetryPolicy) -> Reply:
    create = resolve(client, call.surface)
    retries = 0

    def count(_: RetryCallState) -> None:
        nonlocal retries
        retries += 1

    start = time.perf_counter()
    try:
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(policy.max_retries + 1),
            wait=_wait(policy),
            retry=retry_if_exception(is_transient),
            before_sleep=count,
            sleep=asyncio.sleep,
            reraise=True,
        ):
            with attempt:
                raw = await create(**call.kwargs)
    except Exception as exc:  # noqa: BLE001
        raise _wrap(exc, retries) from exc
    return Reply(to_dict(raw), (time.perf_counter() - start) * 1000.0, retries)
