"""The System One route reads its body itself (gateway/body.py): every body, good or bad, must read as a
FastAPI body parameter reads it. The same bytes go to a route with ``req: SystemOneRequest`` (FastAPI's own parse)
and to one that calls ``read_body``, both behind the gateway's error handlers; the answers must be the same bytes.
And the gateway serves the route as a plain Starlette route ahead of its documented FastAPI one."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.testclient import TestClient
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from jev_shared.gateway import Backend, GatewayConfig
from jev_shared.gateway.app import create_app, http_error, validation_error
from jev_shared.gateway.body import read_body
from jev_shared.gateway.routes import json_response, systemone
from jev_shared.gateway.schema import SystemOneRequest

GOOD = {"model": "m", "state": {"text": "hi", "n": 3}, "questions": {"q": {"type": "noul", "instructions": "ok?"}}}


def _apps() -> tuple[TestClient, TestClient]:
    fastapi_reads, ours = FastAPI(), FastAPI()

    @fastapi_reads.post("/v1/systemone")
    async def parsed(req: SystemOneRequest) -> Response:
        return _echo(req)

    @ours.post("/v1/systemone")
    async def read(request: Request) -> Response:
        return _echo(await read_body(request, SystemOneRequest))

    async def bad_body(_: Request, exc: RequestValidationError) -> Response:
        err = validation_error(exc)
        return json_response(err.status, err.body())

    async def http(_: Request, exc: StarletteHTTPException) -> Response:
        err = http_error(exc)
        return json_response(err.status, err.body())

    for app in (fastapi_reads, ours):
        app.add_exception_handler(RequestValidationError, bad_body)  # type: ignore[arg-type]
        app.add_exception_handler(StarletteHTTPException, http)  # type: ignore[arg-type]
    return TestClient(fastapi_reads), TestClient(ours)


def _echo(req: SystemOneRequest) -> Response:
    """What was parsed, exactly (repr: a lone surrogate or inf survive it, JSON would refuse them)."""
    return Response(repr(req.model_dump()).encode("utf-8", "backslashreplace"))


def _good(**change: object) -> bytes:
    return json.dumps({**GOOD, **change}).encode()


CASES = {
    "good": (_good(), "application/json"),
    "good, a charset": (_good(), "application/json; charset=utf-8"),
    "good, +json": (_good(), "application/vnd.api+json"),
    "good, no content type": (_good(), None),
    "good, text/plain": (_good(), "text/plain"),
    "NaN in the state (Python's json reads it)": (b'{"model": "m", "state": NaN, "questions": {}}', "application/json"),
    "a number past float": (b'{"model": "m", "state": 1e400, "questions": {}}', "application/json"),
    "a lone surrogate": (b'{"model": "m", "state": "\\ud800", "questions": {}}', "application/json"),
    "a key twice": (b'{"model": "a", "model": "b", "state": 1, "questions": {}}', "application/json"),
    "a big integer": (b'{"model": "m", "state": 123456789012345678901234567890, "questions": {}}', "application/json"),
    "UTF-16": (_good().decode().encode("utf-16"), "application/json"),
    "empty": (b"", "application/json"),
    "null": (b"null", "application/json"),
    "a list": (b"[]", "application/json"),
    "not JSON": (b'{"model": "m",\n "state": }', "application/json"),
    "not UTF-8": (b'{"model": "\xff"}', "application/json"),
    "too deep": (b"[" * 100_000, "application/json"),
    "no questions": (json.dumps({"model": "m", "state": 1}).encode(), "application/json"),
    "an unknown field": (_good(temperature=0), "application/json"),
    "an empty model": (_good(model=""), "application/json"),
    "questions a list": (_good(questions=[]), "application/json"),
    "a bad option": (_good(request={"timeout_seconds": -1}), "application/json"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_read_body_reads_as_fastapi_does(case: str) -> None:
    body, content_type = CASES[case]
    headers = {"content-type": content_type} if content_type else {}
    fastapi_reads, ours = _apps()
    want = fastapi_reads.post("/v1/systemone", content=body, headers=headers)
    got = ours.post("/v1/systemone", content=body, headers=headers)
    assert (got.status_code, got.content) == (want.status_code, want.content)


def test_cases_cover_both_paths_and_errors() -> None:
    """The cases above reach the one-step parse, the fallback, and each error (else the parity proves little)."""
    fastapi_reads, _ = _apps()
    statuses = {case: fastapi_reads.post("/v1/systemone", content=body, headers={"content-type": ct} if ct else {})
                .status_code for case, (body, ct) in CASES.items()}
    assert statuses["good"] == statuses["NaN in the state (Python's json reads it)"] == 200
    assert statuses["not JSON"] == statuses["an empty model"] == statuses["good, text/plain"] == 422


def test_the_gateway_serves_systemone_as_a_plain_route_and_documents_it() -> None:
    app = create_app(GatewayConfig(backends={"m": Backend("http://127.0.0.1:9/v1", "m")}, cache=False))
    inner = app
    while not isinstance(inner, FastAPI):
        inner = inner.app
    scope = {"type": "http", "method": "POST", "path": "/v1/systemone", "root_path": "", "headers": []}
    first = next(r for r in inner.router.routes if r.matches(scope)[0] is Match.FULL)
    assert type(first) is Route and first.endpoint is systemone  # Starlette's own route, the one function
    doc = inner.openapi()
    body = doc["paths"]["/v1/systemone"]["post"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/SystemOneRequest"}
    assert body["content"]["application/json"]["examples"]  # bodies a user can paste (tests/gateway/test_openapi.py)
    assert set(doc["components"]["schemas"]["SystemOneRequest"]["properties"]) >= {"model", "state", "questions"}
    with TestClient(app, base_url="http://127.0.0.1") as client:
        bad = client.post("/v1/systemone", content=b'{"model": "m"', headers={"content-type": "application/json"})
        assert bad.status_code == 422 and bad.json()["error"]["type"] == "invalid_request"
        assert client.get("/v1/systemone").status_code == 405
