"""The System One service: ``POST /v1/systemone`` over the engine, plus models, health and metrics.

``create_app(config)`` returns an ASGI app (FastAPI, so ``/docs`` and ``/openapi.json`` come
with it); ``jev serve`` runs it under uvicorn. Every answer comes from the engine's public API,
``AsyncSystemOneClient.system_one``: all questions or none, the first error in question order.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST

from .config import GatewayConfig
from .engines import EnginePool
from .errors import ApiError, from_exception
from .middleware import Front
from .observe import Metrics
from .schema import OptionConflictError, SystemOneRequest, resolve_options

ERROR_SCHEMA = {"content": {"application/json": {"example": {"error": {
    "type": "invalid_question", "message": "a choice takes 1 to 255 options, got 0",
    "question_id": "team", "field": "questions.team.criteria"}}}}}
ERRORS = {code: {"description": what, **ERROR_SCHEMA} for code, what in (
    (401, "missing or wrong bearer key"), (404, "unknown model"), (413, "body over the limit"),
    (422, "a bad question or option, named by id and field; nothing was sent to the backend"),
    (429, "the backend throttles, or the gateway is full: see Retry-After"),
    (502, "the backend failed or its answer was unreadable"), (504, "the request or a backend call timed out"))}


class Gateway:
    """The state one app holds: config, engine clients, metrics, and the in-flight count."""

    def __init__(self, config: GatewayConfig) -> None:
        self.config = config
        self.pool = EnginePool(config)
        self.metrics = Metrics()
        self.in_flight = 0

    async def answer(self, req: SystemOneRequest, info: dict[str, Any]) -> dict[str, Any]:
        info.update(model=req.model, n_questions=len(req.questions))
        try:
            opts, total = resolve_options(req, self.pool.defaults)
        except OptionConflictError as exc:
            raise ApiError(422, "invalid_request", str(exc), field=exc.field) from None
        client = self.pool.get(req.model, opts)
        timeout = min(total or self.config.default_timeout_s, self.config.max_timeout_s)
        if self.in_flight >= self.config.max_in_flight:
            raise ApiError(429, "overloaded", f"the gateway is answering {self.in_flight} requests, its limit",
                           headers={"retry-after": str(self.config.retry_after_s)})
        self.in_flight += 1
        self.metrics.in_flight.inc()
        try:
            resp = await client.system_one(req.state, req.questions, timeout=timeout)
        finally:
            self.in_flight -= 1
            self.metrics.in_flight.dec()
        self.metrics.backend_calls.labels(req.model).inc(resp.usage.n_calls)
        self.metrics.backend_retries.labels(req.model).inc(resp.usage.n_retries)
        self.metrics.questions.labels(req.model).inc(len(resp.answers))
        body = resp.model_dump(mode="json", exclude={"debug"})
        body["model"] = req.model
        return body


def _validation_error(exc: RequestValidationError) -> ApiError:
    """FastAPI's parse errors in the gateway's shape: the first one, its location as ``field``."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    qid = loc[1] if len(loc) >= 2 and loc[0] == "questions" else None
    return ApiError(422, "invalid_request", str(first.get("msg", "invalid request body")),
                    question_id=qid, field=".".join(loc) or None)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body, separators=(",", ":")), status_code=status, headers=headers,
                    media_type="application/json")


def create_app(config: GatewayConfig) -> Any:
    """The gateway as an ASGI app (the FastAPI app wrapped in its front-door middleware)."""
    gw = Gateway(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        gw.pool.warm()
        yield
        await gw.pool.aclose()

    app = FastAPI(title="jev System One gateway", version="0.1.0", lifespan=lifespan,
                  description="Typed decisions (choice, score, noul) over any OpenAI-compatible backend.")
    app.state.gateway = gw

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        request.scope.setdefault("jev", {})["error"] = exc.type
        return _json(exc.status, exc.body(), exc.headers)

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> Response:
        return await api_error(request, _validation_error(exc))

    @app.post("/v1/systemone", responses=ERRORS, summary="Answer typed questions about a state")
    async def systemone(req: SystemOneRequest, request: Request) -> Response:
        try:
            body = await gw.answer(req, request.scope.setdefault("jev", {}))
        except Exception as exc:  # noqa: BLE001 - every failure leaves typed
            raise from_exception(exc, config.retry_after_s) from exc
        return _json(200, body)

    @app.get("/v1/models", summary="The models this gateway serves")
    async def models() -> Response:
        return _json(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "jev"}
                                                      for m in gw.pool.models]})

    @app.get("/healthz", summary="Liveness: the process answers (no backend call)")
    async def healthz() -> Response:
        return _json(200, {"status": "ok", "models": gw.pool.models, "in_flight": gw.in_flight})

    @app.get("/metrics", summary="Prometheus metrics", include_in_schema=True)
    async def metrics() -> Response:
        return Response(gw.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return Front(app, config, gw.metrics)
