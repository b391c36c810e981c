"""The gateway's routes, one router per concern: decisions, models, operations."""

from __future__ import annotations

import json
import time
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST

from .body import json_request_body, read_body
from .deps import caller, gateway
from .errors import ERRORS, Row, from_exception
from .examples import SYSTEMONE_DESCRIPTION, SYSTEMONE_EXAMPLES, with_examples
from .schema import ErrorBody, Health, ModelCard, ModelList, SystemOneReply, SystemOneRequest
from .service import Gateway


def _documented(table: dict[str, Row]) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI ``responses`` of every status in the error table: each type named with what it means."""
    statuses: dict[int, list[str]] = {}
    for kind, row in table.items():
        statuses.setdefault(row.status, []).append(f"`{kind}`: {row.what}")
    return {status: {"model": ErrorBody, "description": "; ".join(lines)} for status, lines in sorted(statuses.items())}


#: Every error the gateway sends, from the table the middlewares and the protocol raise from (``errors.ERRORS``).
_ERRORS = _documented(ERRORS)


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    """Compact JSON, sent as is (the response models document it; validating it again costs time)."""
    return Response(json.dumps(body, separators=(",", ":")), status_code=status, headers=headers,
                    media_type="application/json")


decisions = APIRouter(prefix="/v1", tags=["decisions"])


@decisions.post("/systemone", response_model=SystemOneReply, responses=_ERRORS,
                summary="Answer typed questions about a state", description=SYSTEMONE_DESCRIPTION,
                openapi_extra={"security": [{"bearer": []}],
                               "requestBody": with_examples(json_request_body(SystemOneRequest), SYSTEMONE_EXAMPLES)})
async def systemone(request: Request) -> Response:
    # The hot path: no dependency to solve (the Auth middleware has checked the key; the scheme is declared
    # above, as ``caller`` declares it on the other routes), the body validated from its bytes and the answer
    # serialised by pydantic, each in one step (.body; the body is documented above).
    req = await read_body(request, SystemOneRequest)
    gw: Gateway = request.app.state.gateway
    noted = request.scope.setdefault("jev", {})
    key = noted.get("key") if gw.config.auth_required else None
    try:
        body = await gw.answer_json(req, key, noted)
    except Exception as exc:  # noqa: BLE001 - every failure leaves typed
        raise from_exception(exc, gw.config.retry_after_s) from None
    return Response(body, media_type="application/json")


models = APIRouter(prefix="/v1", tags=["models"])
#: When this process started serving: the cards' ``created`` and ``release_date``.
_STARTED = time.time()


@models.get("/models", response_model=ModelList, responses={401: _ERRORS[401]},
            summary="The models this gateway serves (OpenAI's list and System One's, in one body)")
async def list_models(gw: Gateway = Depends(gateway), _: str | None = Depends(caller)) -> Response:  # noqa: B008
    day = time.strftime("%Y-%m-%d", time.gmtime(_STARTED))
    cards = [ModelCard(id=m, name=m, created=int(_STARTED), release_date=day,
                       description=f"{m} behind the jev System One gateway").model_dump() for m in gw.pool.models]
    return json_response(200, {"object": "list", "data": cards, "models": cards})


ops = APIRouter(tags=["operations"])


@ops.get("/healthz", response_model=Health, responses={503: {"model": Health, "description": "still warming"}},
         summary="Readiness: 200 once --warm questions are prepared (503 before); no backend call, no key")
async def healthz(gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    body = {"status": "ok" if gw.ready else "warming", "ready": gw.ready, "models": gw.pool.models,
            "in_flight": gw.in_flight}
    return json_response(200 if gw.ready else 503, body)


@ops.get("/metrics", summary="Prometheus metrics (text exposition format, no key)", response_class=PlainTextResponse,
         responses={200: {"description": "Prometheus text", "content": {"text/plain": {"schema": {"type": "string"}}}}})
async def metrics(gw: Gateway = Depends(gateway)) -> Response:  # noqa: B008
    return Response(gw.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)
