"""The gateway's front door: small ASGI middlewares, one job each, outermost first.

``RequestId`` (an id on every response) -> ``AccessLog`` (one line and the request metrics) ->
``HostCheck`` (one Host header, RFC 9112; without keys, loopback Host names only: no DNS rebinding)
-> ``Auth`` (the bearer key on ``/v1/*``) -> ``BodyLimit`` (413 before the app parses anything; a
compressed body decoded, within the same limit and once the gateway's in-flight and per-key limits
admit it, by :mod:`.encoding` on a worker thread). Plain ASGI rather than
Starlette's ``BaseHTTPMiddleware``: no task per request per layer. What a layer learns for the
access line (the key, the model, the error type) goes in ``scope["jev"]``.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import os
import re
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import anyio

from . import encoding
from .config import GatewayConfig, key_id
from .errors import ApiError, api_error
from .observe import Metrics, log_access

_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BEARER = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.IGNORECASE)
#: Paths counted under their own label; anything else is "other" (bounded metric cardinality).
KNOWN_PATHS = frozenset({"/v1/systemone", "/v1/decisions", "/v1/models", "/healthz", "/metrics", "/docs", "/openapi.json"})
ASGIApp = Any
#: Compressed bodies decoded at once (worker threads); more wait their turn, off the event loop.
DECODE_THREADS = 2
#: What admits a compressed body before it is decoded: given the key presented, a context held while
#: decoding, or an ApiError (429) raised (``Gateway.decoding``).
Admit = Callable[[str | None], AbstractContextManager[Any]]


def header(scope: dict[str, Any], name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


def info(scope: dict[str, Any]) -> dict[str, Any]:
    """What this request's layers noted for its access line (``scope["jev"]``)."""
    return scope.setdefault("jev", {})


async def send_error(send: Any, err: ApiError) -> None:
    payload = json.dumps(err.body()).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    headers += [(k.encode(), v.encode()) for k, v in err.headers.items()]
    await send({"type": "http.response.start", "status": err.status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class RequestId:
    """The caller's ``x-request-id`` when it is sane, else a new one (32 hex digits of ``os.urandom``: uuid4's
    text without its UUID object, 15.7 K -> 2.0 K instructions); on the response twice (the engine's
    systemone client reads ``x-typesafe-request-id``)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = header(scope, b"x-request-id")
        rid = given if given and _SANE_ID.match(given) else os.urandom(16).hex()
        info(scope)["request_id"] = rid

        async def tagged(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid.encode()),
                                      (b"x-typesafe-request-id", rid.encode())]
            await send(message)

        await self.app(scope, receive, tagged)


class AccessLog:
    """One redacted JSON line per request, and the request count and latency metrics."""

    def __init__(self, app: ASGIApp, config: GatewayConfig, metrics: Metrics) -> None:
        self.app, self.config, self.metrics = app, config, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started, status, done = time.perf_counter(), [500], [False]

        def record() -> None:
            if not done[0]:
                done[0] = True
                self._record(scope, status[0], started)

        async def watched(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                record()  # before the last byte leaves: the line exists once the caller has its answer
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            record()

    def _record(self, scope: dict[str, Any], status: int, started: float) -> None:
        elapsed, noted = time.perf_counter() - started, dict(info(scope))
        presented = noted.pop("key", None)
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        m = self.metrics
        m.child(m.requests, path, str(status)).inc()
        m.child(m.latency, path).observe(elapsed)
        if noted.get("error"):
            m.child(m.errors, noted["error"]).inc()
        client = scope.get("client") or ("", 0)
        fields = {"request_id": noted.pop("request_id", None), "method": scope["method"], "path": scope["path"],
                  "status": status, "latency_ms": round(elapsed * 1000.0, 2), "client": client[0],
                  "key_id": key_id(presented) if presented else None, **noted}
        log_access(fields, [*self.config.api_keys, *([presented] if presented else [])])


class _Refusing:
    """A layer that may answer with an ApiError itself, noting its type for the access line."""

    def __init__(self, app: ASGIApp, config: GatewayConfig) -> None:
        self.app, self.config = app, config

    async def refuse(self, scope: dict[str, Any], send: Any, err: ApiError) -> None:
        info(scope)["error"] = err.type
        await send_error(send, err)


class HostCheck(_Refusing):
    """Without keys, only a loopback ``Host`` (or ``allowed_hosts``): a page on another origin that
    rebinds its name to 127.0.0.1 sends its own name, and is refused before anything runs."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if sum(1 for k, _ in scope.get("headers", ()) if k == b"host") > 1:
            return await self.refuse(scope, send, api_error(
                "bad_request", "the request has more than one Host header (RFC 9112 section 3.2)",
                headers={"connection": "close"}))
        if self.config.host_allowed(header(scope, b"host")):
            return await self.app(scope, receive, send)
        await self.refuse(scope, send, api_error(
            "host_not_allowed", "without API keys the gateway answers only a loopback Host "
                                "(localhost, 127.0.0.1, [::1]) or one given with --allowed-host"))


class Auth(_Refusing):
    """The bearer key on ``/v1/*`` (401 otherwise); the key presented is noted for limits and the log."""

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        match = _BEARER.match(header(scope, b"authorization") or "")
        presented = match.group(1) if match else None
        if presented:
            info(scope)["key"] = presented
        if self._ok(scope["path"], presented):
            return await self.app(scope, receive, send)
        await self.refuse(scope, send, api_error(
            "unauthorized", "a valid bearer key is required (Authorization: Bearer <key>)",
            headers={"www-authenticate": "Bearer"}))

    def _ok(self, path: str, presented: str | None) -> bool:
        if not self.config.auth_required or not path.startswith("/v1/"):
            return True
        return presented is not None and any(hmac.compare_digest(presented.encode(), k.encode())
                                             for k in self.config.api_keys)


class BodyLimit(_Refusing):
    """Read the body up to ``max_body_bytes`` (413 past it, chunked bodies too), decode its
    ``Content-Encoding`` (413 where it decodes past the same limit, 415, 400), then replay it.

    The codings are checked from the header before the body is read; a compressed body is decoded only
    once ``admit`` lets it in (the in-flight and per-key limits: 429), holding a request slot meanwhile,
    on at most :data:`DECODE_THREADS` worker threads, never on the event loop. The whole body must arrive
    within ``body_timeout_s`` of the request's head (408 ``request_timeout``, the connection closed); a
    client that goes away mid-body is not answered."""

    def __init__(self, app: ASGIApp, config: GatewayConfig, admit: Admit | None = None) -> None:
        super().__init__(app, config)
        self.admit: Admit = admit or (lambda key: nullcontext())
        self.limiter: anyio.CapacityLimiter | None = None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        limit = self.config.max_body_bytes
        declared, coded = header(scope, b"content-length"), header(scope, b"content-encoding")
        if declared and declared.isdigit() and int(declared) > limit:
            return await self.refuse(scope, send, _too_big(limit))
        try:
            codings = encoding.check(coded)
        except ApiError as err:
            return await self.refuse(scope, send, err)
        chunks = await self._read(receive, limit)
        if chunks is None:  # the client went away
            return
        if isinstance(chunks, ApiError):
            return await self.refuse(scope, send, chunks)
        body = b"".join(chunks)
        if codings:
            try:
                body = await self._decode(scope, body, coded)
            except ApiError as err:
                return await self.refuse(scope, send, err)
            scope = _decoded_scope(scope, len(body))
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Any, limit: int) -> list[bytes] | ApiError | None:
        """The body's chunks, the error to answer with (413, 408), or None where the client went away.

        ``asyncio.timeout``'s job done on one ``loop.call_at`` (a fifth of its instructions: its state machine is
        Python) and the same way: the task cancelled when the time is up, that cancellation (and no other)
        taken back as the 408."""
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None
        cancelling, expired = task.cancelling(), []

        def expire() -> None:
            expired.append(True)
            task.cancel()

        timer = loop.call_at(loop.time() + self.config.body_timeout_s, expire)
        chunks: list[bytes] = []
        size = 0
        try:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return None
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                if size > limit:
                    return _too_big(limit)
                if not message.get("more_body", False):
                    return chunks
        except asyncio.CancelledError:
            if expired:
                expired.clear()
                if task.uncancel() <= cancelling:
                    return api_error("request_timeout", f"the request's body did not arrive within "
                                     f"{self.config.body_timeout_s:g} s (--body-timeout)", headers={"connection": "close"})
            raise
        finally:
            timer.cancel()
            if expired:  # the time ran out with the body in hand, or on another error: taken back all the same
                task.uncancel()

    async def _decode(self, scope: dict[str, Any], body: bytes, coded: str | None) -> bytes:
        if self.limiter is None:  # made on the serving loop
            self.limiter = anyio.CapacityLimiter(DECODE_THREADS)
        with self.admit(info(scope).get("key")):
            return await anyio.to_thread.run_sync(encoding.decode, body, coded, self.config.max_body_bytes,
                                                  limiter=self.limiter)


def _too_big(limit: int) -> ApiError:
    """413: built when a body is refused, not for every body that is not (it was built per request)."""
    return api_error("payload_too_large", f"the request body is over the limit of {limit} bytes (--max-body-bytes)",
                     headers={"connection": "close"})


def _decoded_scope(scope: dict[str, Any], size: int) -> dict[str, Any]:
    """The request as the app sees it once decoded: no ``content-encoding``, the decoded ``content-length``."""
    headers = [(k, v) for k, v in scope["headers"] if k not in (b"content-encoding", b"content-length")]
    return {**scope, "headers": [*headers, (b"content-length", str(size).encode())]}


def _replay(body: bytes, receive: Any) -> Any:
    sent = [False]

    async def replay() -> dict[str, Any]:
        if sent[0]:
            return await receive()
        sent[0] = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def front(app: ASGIApp, config: GatewayConfig, metrics: Metrics, admit: Admit | None = None) -> ASGIApp:
    """``app`` behind every layer, in order (the last wrapped is the outermost); ``admit`` gates decoding."""
    app = BodyLimit(app, config, admit)
    for layer in (Auth, HostCheck):
        app = layer(app, config)
    outer = RequestId(AccessLog(app, config, metrics))
    outer.gateway_config = config  # type: ignore[attr-defined]  # BackgroundServer reads its bounds off the app
    return outer
