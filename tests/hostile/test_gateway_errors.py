"""The OpenAPI document of ``POST /v1/systemone`` lists every status the route returns,
generated from the same error table (``errors.ERRORS``) that the middlewares, the protocol and the
routes raise from; the engine's error codes map into it.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import httpx
import pytest

import jev_shared
from jev_shared import JevError, ProviderError
from jev_shared.gateway import GatewayConfig
from jev_shared.gateway.app import create_app
from jev_shared.gateway.errors import ERRORS

GATEWAY = Path(jev_shared.__file__).parent / "gateway"


@pytest.fixture(scope="module")
def responses():
    """``/openapi.json`` as served (in process, through the middlewares): the route's responses."""
    app = create_app(GatewayConfig(backends={}))

    async def fetch():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
            return (await http.get("/openapi.json")).json()

    return asyncio.run(fetch())["paths"]["/v1/systemone"]["post"]["responses"]


def test_the_document_lists_every_status_of_the_table(responses):
    assert set(responses) == {"200"} | {str(row.status) for row in ERRORS.values()}
    for kind, row in ERRORS.items():
        assert f"`{kind}`" in responses[str(row.status)]["description"], kind
        assert responses[str(row.status)]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/ErrorBody"}


def test_every_refusal_status_is_documented_with_its_error_type(responses):
    for status, kind in ((400, "invalid_encoding"), (400, "bad_request"), (413, "payload_too_large"),
                         (415, "unsupported_encoding"), (401, "unauthorized"), (429, "overloaded"),
                         (503, "too_many_connections"), (502, "backend_error"), (504, "timeout"),
                         (422, "invalid_question")):
        assert f"`{kind}`" in responses[str(status)]["description"]


def _subclasses(cls: type) -> list[type]:
    return [c for sub in cls.__subclasses__() for c in (sub, *_subclasses(sub))]


def test_every_engine_error_maps_into_the_table():
    for cls in (JevError, *_subclasses(JevError)):
        code, status = vars(cls).get("code"), vars(cls).get("status_hint")
        if isinstance(code, str):
            assert code in ERRORS, cls
            hint = status if isinstance(status, int) else next(
                vars(c)["status_hint"] for c in cls.__mro__ if isinstance(vars(c).get("status_hint"), int))
            assert ERRORS[code].status == hint, cls
    for err in (ProviderError("x", status_code=429), ProviderError("x", status_code=500),
                ProviderError("x", timed_out=True)):
        assert ERRORS[err.code].status == err.status_hint, err.code


def test_every_error_the_gateway_raises_is_in_the_table():
    found = 0
    for path in sorted(GATEWAY.glob("*.py")):
        text = path.read_text()
        for status, kind in re.findall(r'ApiError\(\s*(\d{3}),\s*"([a-z_]+)"', text):
            assert ERRORS[kind].status == int(status), (path.name, kind)
            found += 1
        for kind in re.findall(r'(?:api_error|raw_error|_refuse)\(\s*"([a-z_]+)"', text):
            assert kind in ERRORS, (path.name, kind)
            found += 1
    assert found >= 20
