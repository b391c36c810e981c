"""The System One service: ``POST /v1/systemone`` over the engine, plus models, health and metrics.

``create_app(config)`` returns the ASGI app: FastAPI (routers per concern in :mod:`.routes`, the
Gateway as a dependency, ``/docs`` and ``/openapi.json`` with the question union and the bearer
scheme) behind the small middlewares of :mod:`.middleware`. Every answer comes from the engine's
public API, ``AsyncSystemOneClient.system_one``: all questions or none, the first error in order.
Every failure, FastAPI's own included (a body that is not JSON, 404, 405), leaves as
``{"error": {type, message, ...}}``. Each endpoint has one implementation, its FastAPI route; the hot one,
``/v1/systemone``, is served by the same function as a plain Starlette route ahead of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import Response
from fastapi_offline import FastAPIOffline
from pydantic import TypeAdapter
from pydantic.json_schema import models_json_schema
from starlette.exceptions import HTTPException as StarletteHTTPException

from . import decisions_wire
from .config import GatewayConfig
from .errors import ApiError, api_error
from .middleware import front
from .routes import decisions, json_response, models, ops, systemone
from .schema import QuestionDoc, SystemOneRequest
from .service import Gateway

_HTTP_TYPES = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
#: FastAPI's native OpenTelemetry off (its documented ``telemetry=`` setting): it acts only through process-wide
#: OTel providers, which ``jev serve`` never configures (the gateway reports through its Prometheus metrics and
#: access line), yet asking for the three providers cost ~33 K instructions a request.
TELEMETRY = {"tracing": False, "metrics": False, "logs": False}


def _position(doc: str, pos: int) -> str:
    line = doc.count("\n", 0, pos) + 1
    return f"line {line} column {pos - (doc.rfind(chr(10), 0, pos) + 1) + 1}"


def validation_error(exc: RequestValidationError) -> ApiError:
    """FastAPI's parse errors in the gateway's shape: the first one, its location as ``field``."""
    first = exc.errors()[0] if exc.errors() else {}
    if first.get("type") == "json_invalid":  # loc is ("body", position): a place in the text, not a field
        pos, doc = first["loc"][-1], exc.body if isinstance(exc.body, str) else ""
        where = _position(doc, pos) if isinstance(pos, int) else "?"
        return api_error("invalid_request", f"the body is not JSON: {first.get('ctx', {}).get('error')} "
                                            f"at {where}")
    loc = [str(p) for p in first.get("loc", ()) if p != "body"]
    if not loc and first.get("type") in ("model_attributes_type", "dict_type", "missing"):
        return api_error("invalid_request", "the body must be a JSON object (Content-Type: application/json)")
    qid = loc[1] if len(loc) >= 2 and loc[0] == "questions" else None
    return api_error("invalid_request", str(first.get("msg", "invalid request body")),
                     question_id=qid, field=".".join(loc) or None)


def http_error(exc: StarletteHTTPException) -> ApiError:
    """Starlette's and FastAPI's own HTTP errors (a body it could not decode, 404, 405) typed."""
    cause = exc.__cause__
    if isinstance(cause, UnicodeDecodeError):
        return api_error("invalid_request", f"the body is not UTF-8 (byte {cause.object[cause.start]:#04x} at "
                                            f"offset {cause.start})")
    if isinstance(cause, RecursionError):
        return api_error("invalid_request", "the body nests too deep to decode (states nest at most 100 levels)")
    kind = _HTTP_TYPES.get(exc.status_code, f"http_{exc.status_code}")
    return ApiError(exc.status_code, kind, str(exc.detail), headers=dict(exc.headers or {}))


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the question union (``Question``: choice | score | noul by ``type``) and the
    System One request, whose route reads its body itself (.body)."""
    if app.openapi_schema is None:
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        union = TypeAdapter(QuestionDoc).json_schema(ref_template="#/components/schemas/{model}")
        schemas = doc.setdefault("components", {}).setdefault("schemas", {})
        schemas.update(union.pop("$defs", {}))
        schemas["Question"] = union
        _, request = models_json_schema([(SystemOneRequest, "validation")], ref_template="#/components/schemas/{model}")
        schemas.update(request["$defs"])
        app.openapi_schema = doc
    return app.openapi_schema


def _handlers(app: FastAPI) -> None:
    async def api_error(request: Request, exc: ApiError) -> Response:
        request.scope.setdefault("jev", {})["error"] = exc.type
        body = decisions_wire.error_body(exc) if request.url.path == decisions_wire.PATH else exc.body()
        return json_response(exc.status, body, exc.headers)

    async def bad_body(request: Request, exc: RequestValidationError) -> Response:
        return await api_error(request, validation_error(exc))

    async def http(request: Request, exc: StarletteHTTPException) -> Response:
        return await api_error(request, http_error(exc))

    app.add_exception_handler(ApiError, api_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, bad_body)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http)  # type: ignore[arg-type]


def create_app(config: GatewayConfig) -> Any:
    """The gateway as an ASGI app: the FastAPI app behind its middlewares."""
    gw = Gateway(config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        gw.pool.warm()
        warming = asyncio.create_task(gw.warm_up())  # /healthz answers (not ready) meanwhile
        yield
        warming.cancel()
        await gw.pool.aclose()

    # /docs and /redoc with Swagger UI's and ReDoc's assets served from the fastapi-offline package: no CDN
    app = FastAPIOffline(title="jev System One gateway", version="0.1.0", lifespan=lifespan, telemetry=TELEMETRY,
                         description="Typed decisions (choice, score, noul) over any OpenAI-compatible backend.")
    app.state.gateway = gw
    _handlers(app)
    # The hot route's one function served as a plain Starlette route, first in the routes so that it matches first
    # (after the docs' five routes it cost 0.06 M instructions more); its FastAPI route (the same function, below)
    # documents it. FastAPI's per-request work for a route (dependencies, query and cookie parsing, exit stacks)
    # was 0.25 M of the 0.51 M instructions FastAPI took a request, for an endpoint that takes only the request
    # and reads its body itself (.body).
    app.add_route("/v1/systemone", systemone, methods=["POST"], include_in_schema=False)
    app.router.routes.insert(0, app.router.routes.pop())
    for router in (decisions, decisions_wire.wire, models, ops):
        app.include_router(router)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]  # FastAPI's documented way to customise the schema
    outer = front(app, config, gw.metrics, admit=gw.decoding)
    outer.gateway = gw  # for embedding and tests: its pool, memory, counts
    return outer
