"""``POST /v1/systemone`` answered straight from ASGI, in front of FastAPI: the request's hot path.

FastAPI's request handling (its routing, exception and exit-stack middlewares, dependency solving,
sync dependencies run on a thread pool) cost as much CPU as the engine's own work per request
(``bench/gateway_cpu.py``). This layer takes the one route that matters and does what FastAPI did
for it, once: the JSON body parsed, ``SystemOneRequest`` validated, ``Gateway.answer`` called, the
answer or the typed error sent. Anything it would answer differently is handed to FastAPI instead,
with the body replayed: a body that is not JSON (or not sent as ``application/json``), not the
request shape, any other method or path. So every error keeps FastAPI's exact words, and the route
stays declared there for ``/openapi.json``.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from .errors import ApiError, from_exception
from .schema import SystemOneRequest
from .service import Gateway

PATH = "/v1/systemone"
_JSON = b"application/json"


def dumps(body: Any) -> bytes:
    """Compact JSON bytes (the response models document it; validating it again costs time)."""
    return json.dumps(body, separators=(",", ":")).encode()


def _json_typed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Sent as ``application/json`` (a ``; charset=...`` allowed), as FastAPI's strict content type reads it."""
    for k, v in headers:
        if k == b"content-type":
            return v.split(b";", 1)[0].strip().lower() == _JSON
    return False


def _parse(body: bytes) -> SystemOneRequest | None:
    """The request, or None where FastAPI's own parsing would answer (it names the error)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):  # JSONDecodeError, UnicodeDecodeError
        return None
    if not isinstance(data, dict):
        return None
    try:
        return SystemOneRequest.model_validate(data)
    except (ValidationError, RecursionError):
        return None


async def send_json(send: Any, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
    raw = [(b"content-length", str(len(payload)).encode()), (b"content-type", _JSON)]
    if headers:
        raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


class SystemOneFastPath:
    """The ASGI layer: ``POST /v1/systemone`` here, everything else (and every parse error) to ``app``."""

    def __init__(self, app: Any, gateway: Gateway) -> None:
        self.app, self.gateway = app, gateway

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != PATH \
                or not _json_typed(scope["headers"]):
            return await self.app(scope, receive, send)
        body, message = await _read(receive)
        if message is not None:  # the client went away mid-body: FastAPI sees the same
            return await self.app(scope, _replay(body, message, receive), send)
        req = _parse(body) if body else None
        if req is None:
            return await self.app(scope, _replay(body, None, receive), send)
        await self.answer(scope, req, send)

    async def answer(self, scope: dict[str, Any], req: SystemOneRequest, send: Any) -> None:
        gw = self.gateway
        noted = scope.setdefault("jev", {})
        key = noted.get("key") if gw.config.auth_required else None
        try:
            reply = await gw.answer_json(req, key, noted)
        except Exception as exc:  # noqa: BLE001 - every failure leaves typed
            err: ApiError = from_exception(exc, gw.config.retry_after_s)
            noted["error"] = err.type
            return await send_json(send, err.status, dumps(err.body()), err.headers)
        await send_json(send, 200, reply)


async def _read(receive: Any) -> tuple[bytes, dict[str, Any] | None]:
    """The whole body (the BodyLimit layer has bounded it), or what came and the disconnect."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), message
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks), None


def _replay(body: bytes, last: dict[str, Any] | None, receive: Any) -> Any:
    """``receive`` for the app behind: the body read so far, then what ended it (or the live channel)."""
    queue: list[dict[str, Any]] = [{"type": "http.request", "body": body, "more_body": last is not None}]
    if last is not None:
        queue.append(last)

    async def replay() -> dict[str, Any]:
        return queue.pop(0) if queue else await receive()

    return replay
