"""The gateway's front door, as plain ASGI (cheaper than a per-request task per middleware).

For every request: a request id (the caller's ``x-request-id`` when it is sane, else a new one)
on the response as ``x-request-id`` and ``x-typesafe-request-id`` (which the engine's
``api="systemone"`` client reports); the body limit (413, before the app parses anything); the
bearer key on ``/v1/*`` (401); one access-log line; request counts and latency.
"""

from __future__ import annotations

import hmac
import json
import re
import time
import uuid
from typing import Any

from .config import GatewayConfig, key_id
from .errors import ApiError
from .observe import Metrics, log_access

_SANE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_BEARER = re.compile(r"^\s*bearer\s+(\S+)\s*$", re.IGNORECASE)
#: Paths counted under their own label; anything else is "other" (bounded metric cardinality).
KNOWN_PATHS = frozenset({"/v1/systemone", "/v1/models", "/healthz", "/metrics", "/docs", "/openapi.json"})


def _header(scope: dict[str, Any], name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


class Front:
    """ASGI middleware: ``Front(app, config, metrics)``."""

    def __init__(self, app: Any, config: GatewayConfig, metrics: Metrics) -> None:
        self.app, self.config, self.metrics = app, config, metrics

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        given = _header(scope, b"x-request-id")
        rid = given if given and _SANE_ID.match(given) else uuid.uuid4().hex
        info: dict[str, Any] = {}
        scope["jev"] = info
        status = [500]
        presented = self._presented_key(scope)

        recorded = [False]

        def record() -> None:
            if not recorded[0]:
                recorded[0] = True
                self._record(scope, rid, status[0], started, presented, info)

        async def tagged_send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid.encode()),
                                      (b"x-typesafe-request-id", rid.encode())]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                record()  # before the last byte leaves: the line exists once the caller has its answer
            await send(message)

        try:
            refusal = self._auth(scope, presented)
            if refusal is None:
                receive, refusal = await self._limited_body(scope, receive)
            if refusal is not None:
                info["error"] = refusal.type
                await self._send_error(refusal, tagged_send)
            else:
                await self.app(scope, receive, tagged_send)
        finally:
            record()

    def _presented_key(self, scope: dict[str, Any]) -> str | None:
        match = _BEARER.match(_header(scope, b"authorization") or "")
        return match.group(1) if match else None

    def _auth(self, scope: dict[str, Any], presented: str | None) -> ApiError | None:
        if not self.config.auth_required or not scope["path"].startswith("/v1/"):
            return None
        ok = presented is not None and any(hmac.compare_digest(presented.encode(), k.encode())
                                           for k in self.config.api_keys)
        if ok:
            return None
        return ApiError(401, "unauthorized", "a valid bearer key is required (Authorization: Bearer <key>)",
                        headers={"www-authenticate": "Bearer"})

    async def _limited_body(self, scope: dict[str, Any], receive: Any) -> tuple[Any, ApiError | None]:
        """Read the body up to the limit, then replay it to the app; a larger one is a 413."""
        if scope["method"] not in ("POST", "PUT", "PATCH"):
            return receive, None
        limit = self.config.max_body_bytes
        too_big = ApiError(413, "payload_too_large", f"the request body is over the limit of {limit} bytes")
        declared = _header(scope, b"content-length")
        if declared and declared.isdigit() and int(declared) > limit:
            return receive, too_big
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                return receive, too_big
            chunks.append(chunk)
            more = message.get("more_body", False)
        body, sent = b"".join(chunks), [False]

        async def replay() -> dict[str, Any]:
            if sent[0]:
                return await receive()
            sent[0] = True
            return {"type": "http.request", "body": body, "more_body": False}

        return replay, None

    async def _send_error(self, err: ApiError, send: Any) -> None:
        payload = json.dumps(err.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
        headers += [(k.encode(), v.encode()) for k, v in err.headers.items()]
        await send({"type": "http.response.start", "status": err.status, "headers": headers})
        await send({"type": "http.response.body", "body": payload})

    def _record(self, scope: dict[str, Any], rid: str, status: int, started: float, presented: str | None,
                info: dict[str, Any]) -> None:
        elapsed = time.perf_counter() - started
        path = scope["path"] if scope["path"] in KNOWN_PATHS else "other"
        self.metrics.requests.labels(path, str(status)).inc()
        self.metrics.latency.labels(path).observe(elapsed)
        if info.get("error"):
            self.metrics.errors.labels(info["error"]).inc()
        client = scope.get("client") or ("", 0)
        fields = {"request_id": rid, "method": scope["method"], "path": scope["path"], "status": status,
                  "latency_ms": round(elapsed * 1000.0, 2), "client": client[0],
                  "key_id": key_id(presented) if presented else None, **info}
        log_access(fields, [*self.config.api_keys, *([presented] if presented else [])])
