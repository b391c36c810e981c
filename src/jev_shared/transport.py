"""Transport: call the client, retry transient faults, and hand back a plain-dict reply.

Transient faults (408, 409, 429, 5xx, connection errors, timeouts) are retried with exponential
backoff and jitter, honouring ``Retry-After`` / ``retry-after-ms``. The openai SDK's
own retries are switched off (``with_options(max_retries=0)``) so the two never multiply.
Anything else becomes a :class:`ProviderError` carrying the status code and the provider's words.
A client the engine built over its own HTTP client (``LocalServer.client()``) is posted to with it (direct.py).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from . import direct
from .backend import Backend
from .calls import NO_BUDGET, Budget, Call, Reply
from .errors import JevError, MalformedReplyError, ProviderError
from .redact import client_secrets, redact, redact_text
from .surfaces.registry import ROUTES

TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
MAX_RETRY_AFTER_S = 60.0


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    initial_s: float = 0.5
    max_s: float = 8.0


def to_dict(obj: Any) -> dict[str, Any]:
    """SDK objects (pydantic), raw SDK responses, mappings, and plain objects → dict.

    A body that is not a JSON object is a provider fault, raised as :class:`MalformedReplyError`.
    """
    try:
        body = _as_dict(obj)
    except (ValueError, TypeError, AttributeError) as exc:  # JSONDecodeError, UnicodeDecodeError among them
        raise MalformedReplyError(f"the provider's reply is not JSON ({type(exc).__name__}: {exc})",
                                  status_code=200) from None
    if not isinstance(body, dict):
        raise MalformedReplyError(f"the provider's reply is JSON but not an object (a {type(body).__name__})",
                                  status_code=200)
    return body


def _as_dict(obj: Any) -> Any:
    if obj is None:
        return {}
    if isinstance(obj, (bytes, str)):  # the lean and direct posts' replies: the body's bytes
        return json.loads(obj)
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
    """The server's own wait, from retry-after-ms or retry-after (seconds or an HTTP date, as the openai
    SDK reads it), capped at :data:`MAX_RETRY_AFTER_S`; a date in the past is no wait."""
    headers = getattr(getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return min(float(ms) / 1000.0, MAX_RETRY_AFTER_S)
        s = headers.get("retry-after")
        if s is None:
            return None
        try:
            return min(float(s), MAX_RETRY_AFTER_S)
        except ValueError:
            when = email.utils.parsedate_to_datetime(s)  # an HTTP date (RFC 9110), else ValueError
            wait = when.timestamp() - time.time()
            return min(max(wait, 0.0), MAX_RETRY_AFTER_S)
    except (TypeError, ValueError, OverflowError):
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
    if isinstance(body, str) and body.strip():
        return body.strip()  # a text body is the provider's words (openai 2.x says them, 3.x only "Error code: N")
    return str(exc)


def backoff_s(policy: RetryPolicy, attempt: int) -> float:
    """Exponential backoff with full jitter on top: initial·2^(n−1) + U(0, initial), capped."""
    return min(policy.max_s, policy.initial_s * 2 ** (attempt - 1) + random.uniform(0, policy.initial_s))


class ProviderCause(Exception):
    """What stands in for the SDK's exception in a :class:`ProviderError`'s chain: its class and its
    redacted words, nothing else (the SDK's own exception, its request and its body may echo a key)."""


#: Exception class names (the openai/anthropic SDKs', httpx's) that mean "this call ran out of time".
TIMEOUT_NAMES = frozenset({"APITimeoutError", "ReadTimeout", "ConnectTimeout", "WriteTimeout", "PoolTimeout",
                           "TimeoutException"})


def timed_out(exc: BaseException) -> bool:
    """A backend call that ran past its own timeout (the SDK's, httpx's, or a socket's), chain included."""
    seen: BaseException | None = exc
    for _ in range(8):
        if seen is None:
            return False
        if isinstance(seen, TimeoutError) or type(seen).__name__ in TIMEOUT_NAMES:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _wrap(exc: BaseException, retries: int, secrets: tuple[str, ...] = ()) -> ProviderError:
    """The SDK's exception as a ProviderError; every text in it redacted (proxies echo keys back).

    The SDK's exception is not kept: a redacted stand-in (:class:`ProviderCause`) is its cause.
    """
    if isinstance(exc, ProviderError):
        return exc
    code = status_of(exc)
    headers = getattr(getattr(exc, "response", None), "headers", None) or {}
    request_id = headers.get("x-typesafe-request-id") or headers.get("x-request-id") if headers else None
    said = redact_text(provider_message(exc), secrets)
    err = ProviderError(
        f"provider error{f' {code}' if code else ''}: {said}"
        + (f" (request id {request_id})" if request_id else "")
        + (f" (after {retries} retries)" if retries else ""),
        status_code=code, provider_message=said, body=redact(getattr(exc, "body", None), secrets),
        request_id=request_id, n_retries=retries, retry_after_s=retry_after_s(exc), timed_out=timed_out(exc),
    )
    err.__cause__ = ProviderCause(f"{type(exc).__module__}.{type(exc).__name__}: {redact_text(str(exc), secrets)}")
    return err


def _sdk_timeout(client: Any, budget: Budget) -> dict[str, float]:
    """Cap one attempt by what is left of the budget (the openai and anthropic SDKs take ``timeout``)."""
    left = budget.left()
    if left is None or type(client).__module__.split(".")[0] not in ("openai", "anthropic"):
        return {}
    own = getattr(client, "timeout", None)  # the client's own per-request timeout: a float or an httpx.Timeout
    own_s = own if isinstance(own, (int, float)) else getattr(own, "read", None)
    if isinstance(own_s, (int, float)) and own_s <= left:
        return {}  # the tighter limit is the client's own: keep it
    return {"timeout": max(left, 0.001)}


#: Requests one client keeps in flight at once, across all its calls, when its connection pool is larger or
#: unknown: more would wait inside the SDK's pool, where httpcore re-scans every waiter on each change.
MAX_IN_FLIGHT = 64


def in_flight_limit(client: Any) -> int:
    """How many requests the client's connection pool can carry at once (its httpx ``max_connections``),
    at most :data:`MAX_IN_FLIGHT`; the engine never queues more on it (the rest would wait in the pool, their
    timeouts running before they are sent)."""
    http = getattr(client, "_client", None)  # the openai and anthropic SDKs' httpx client
    pool = getattr(getattr(http, "_transport", None), "_pool", None)
    size = getattr(pool, "_max_connections", None)
    return max(1, min(size, MAX_IN_FLIGHT)) if isinstance(size, int) else MAX_IN_FLIGHT


def resolve(client: Any, call: Call) -> Callable[..., Any]:
    """The bound method a call names (``call.path``): chat.completions.create, responses.create, …"""
    if call.path == ("post",):  # a plain POST through the client (the hosted API): its base URL and key apply
        def post(path: str, body: Any, timeout: float | None = None) -> Any:
            options = {"timeout": timeout} if timeout is not None else {}
            return client.post(path, body=body, cast_to=object, options=options)

        return post
    route = ROUTES.get(call.surface)
    if route is not None and _is_sdk(client) and callable(getattr(client, "post", None)):
        target = Backend.of(client).http  # the HTTP client the engine built this SDK client over (direct.py)
        if target is not None and target.serves(client):
            return partial(direct.apost if target.is_async else direct.post, target, route, client.timeout)
        return partial(_lean_post, client, route)
    obj = client
    for part in call.path[:-1]:
        obj = getattr(obj, part)
    # the openai SDK's raw-response twin skips building pydantic models we would only dump again
    raw = getattr(obj, "with_raw_response", None)
    create = getattr(raw, "create", None) if raw is not None else None
    return create if callable(create) else getattr(obj, call.path[-1])


#: The registry's routes (``Surface.route``) are posted through the SDK client's own ``post`` (its auth, base URL,
#: timeout and typed errors), skipping the resource method's parameter transform and the response models, which
#: cost most of a decision's CPU (bench/cpu.py) and which the engine would only turn back into a dict.
#: A resource method's own keywords and the request options they are in the SDK's ``post``.
_SDK_OPTIONS = {"extra_headers": "headers", "extra_query": "params", "extra_body": "extra_json", "timeout": "timeout"}


def _is_sdk(client: Any) -> bool:
    return _sdk_module(type(client).__module__)


@functools.lru_cache(maxsize=64)
def _sdk_module(module: str) -> bool:
    return module.split(".")[0] in ("openai", "anthropic")


def _lean_post(client: Any, route: str, **kwargs: Any) -> Any:
    """The request the resource method would send (the same JSON body), answered as the body's bytes."""
    options = {opt: kwargs.pop(name) for name, opt in _SDK_OPTIONS.items() if name in kwargs}
    return client.post(route, body=kwargs, cast_to=bytes, options=options)


def _retry_delay(policy: RetryPolicy, budget: Budget, exc: BaseException, attempt: int) -> float | None:
    """The wait before the next attempt after ``exc`` ended attempt ``attempt``, or None: raise it.

    Transient faults only, at most ``policy.max_retries`` retries; the server's own wait where it
    names one, else the backoff; never past what is left of the budget (the next check ends a spent one).
    """
    if attempt > policy.max_retries or not is_transient(exc):
        return None
    told = retry_after_s(exc)
    delay = told if told is not None else backoff_s(policy, attempt)
    left = budget.left()
    return delay if left is None else max(0.0, min(delay, left))


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        budget: Budget = state.args[0]
        delay = _retry_delay(policy, budget, exc, state.attempt_number) if exc is not None else 0.0
        return delay or 0.0

    return wait


def _retried(exc: BaseException) -> bool:
    """A transient provider fault; never the call's own deadline (budget.check) or another engine error."""
    return is_transient(exc) and not isinstance(exc, JevError)


@functools.lru_cache(maxsize=64)
def retrying(policy: RetryPolicy) -> Retrying:
    """The one tenacity ``Retrying`` of a policy (so of a client): transient faults only, at most
    ``max_retries`` retries, the server's Retry-After (seconds or an HTTP date) else the backoff, never past
    the call's budget. Thread-safe (tenacity keeps each thread's attempt state apart); 0.01 ms a call."""
    return Retrying(stop=stop_after_attempt(policy.max_retries + 1), retry=retry_if_exception(_retried),
                    wait=_wait(policy), reraise=True, sleep=time.sleep)


@functools.lru_cache(maxsize=64)
def aretrying(policy: RetryPolicy) -> AsyncRetrying:
    """:func:`retrying` for coroutines; each call runs on its own ``copy()`` (tasks share a thread's state)."""
    return AsyncRetrying(stop=stop_after_attempt(policy.max_retries + 1), retry=retry_if_exception(_retried),
                         wait=_wait(policy), reraise=True, sleep=asyncio.sleep)


def _replayed(first: Exception, attempt: Callable[[Budget], Any]) -> Callable[[Budget], Any]:
    """``attempt``, whose first run raises ``first`` (the attempt already made): tenacity's stop, retry and wait
    rules then decide on it as on any attempt. Tenacity's bookkeeping on a call that succeeds at once was
    0.02-0.03 ms, a tenth of the engine's own CPU per decision (bench/cpu.py); a retry pays it as before."""
    pending: list[Exception] = [first]

    def again(budget: Budget) -> Any:
        if pending:
            raise pending.pop()
        return attempt(budget)

    return again


def _areplayed(first: Exception, attempt: Callable[[Budget], Any]) -> Callable[[Budget], Any]:
    """:func:`_replayed` for a coroutine ``attempt``."""
    pending: list[Exception] = [first]

    async def again(budget: Budget) -> Any:
        if pending:
            raise pending.pop()
        return await attempt(budget)

    return again


def send(client: Any, call: Call, policy: RetryPolicy, budget: Budget = NO_BUDGET) -> Reply:
    create = resolve(client, call)
    attempts = [0]
    start = time.perf_counter()

    def attempt(budget: Budget) -> Any:
        attempts[0] += 1
        budget.check()
        return create(**call.kwargs, **_sdk_timeout(client, budget))

    try:
        try:
            raw = attempt(budget)  # the first attempt outside tenacity: most calls need no second (see _replayed)
        except Exception as first:  # noqa: BLE001 - tenacity decides, as if it had made the attempt
            raw = retrying(policy)(_replayed(first, attempt), budget)
    except Exception as exc:  # noqa: BLE001 - classified here, re-raised typed
        failure = _wrap(exc, attempts[0] - 1, client_secrets(client))
    else:
        return Reply(to_dict(raw), (time.perf_counter() - start) * 1000.0, attempts[0] - 1)
    raise failure  # outside the handler: the SDK's exception is neither cause nor context


async def asend(client: Any, call: Call, policy: RetryPolicy, budget: Budget = NO_BUDGET) -> Reply:
    create = resolve(client, call)
    attempts = [0]
    start = time.perf_counter()

    async def attempt(budget: Budget) -> Any:
        attempts[0] += 1
        budget.check()
        return await create(**call.kwargs, **_sdk_timeout(client, budget))

    try:
        try:
            raw: Any = await attempt(budget)
        except Exception as first:  # noqa: BLE001
            raw = await aretrying(policy).copy()(_areplayed(first, attempt), budget)
    except Exception as exc:  # noqa: BLE001
        failure = _wrap(exc, attempts[0] - 1, client_secrets(client))
    else:
        return Reply(to_dict(raw), (time.perf_counter() - start) * 1000.0, attempts[0] - 1)
    raise failure
