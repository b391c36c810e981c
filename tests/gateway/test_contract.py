"""The gateway's contract, in process over ``httpx.ASGITransport``:
its limits, its error shape for every body it cannot decode and for FastAPI's own errors, the Host
check without keys, and the OpenAPI document. The backend is the loopback stub; each test asserts
what the stub received (0 requests whenever the gateway refuses).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from jev_shared.gateway.app import create_app
from tests.gateway.conftest import KEY, MODEL, client, config_for

pytestmark = pytest.mark.anyio
NOUL = {"type": "noul", "instructions": "This is spam."}


def body(n_questions: int = 1, **extra) -> dict:
    return {"model": MODEL, "state": "x truth=yes", "questions": {f"q{i}": NOUL for i in range(n_questions)}, **extra}


def the_error(resp: httpx.Response) -> dict:
    """The gateway's shape and only it: ``{"error": {type, message, ...}}``, never FastAPI's ``detail``."""
    doc = resp.json()
    assert set(doc) == {"error"} and {"type", "message"} <= set(doc["error"]), doc
    return doc["error"]


async def test_questions_over_the_cap_are_a_422_naming_the_limit(stub):
    app = create_app(config_for(stub, max_questions=4))
    async with client(app) as http:
        resp = await http.post("/v1/systemone", json=body(5))
        assert (await http.post("/v1/systemone", json=body(4))).status_code == 200
    err = the_error(resp)
    assert resp.status_code == 422 and err["type"] == "too_many_questions" and err["field"] == "questions"
    assert "limit is 4" in err["message"] and "--max-questions" in err["message"]
    assert stub.requests == 4  # the 4-question request only


async def test_the_default_cap_refuses_3000_questions_before_any_backend_call(stub):
    app = create_app(config_for(stub, max_body_bytes=1_000_000))
    payload = body(3000)
    assert 150_000 < len(json.dumps(payload)) < 1_000_000  # under the body limit: the question cap refuses it
    async with client(app) as http:
        resp = await http.post("/v1/systemone", json=payload)
    assert resp.status_code == 422 and the_error(resp)["type"] == "too_many_questions"
    assert "limit is 64" in the_error(resp)["message"] and stub.requests == 0


async def test_backend_calls_in_flight_are_capped_per_key(stub):
    """A key holding its limit of backend calls gets 429 ``key_overloaded``; another key is not held up;
    and one request asking for more concurrency than the limit is throttled to it, not refused."""
    keys = frozenset({KEY, KEY + "-other"})
    app = create_app(config_for(stub, api_keys=keys, max_calls_per_key=4, max_concurrency=8))
    stub.fault = "hang"
    async with client(app) as http, client(app, key=KEY + "-other", start=False) as other:
        first = asyncio.create_task(http.post("/v1/systemone", json=body(10, backend={"max_concurrency": 64})))
        for _ in range(500):
            if stub.requests >= 4:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        assert stub.requests == 4  # 10 questions, at most 4 of its calls in flight
        refused = await http.post("/v1/systemone", json=body(1))
        err = the_error(refused)
        assert refused.status_code == 429 and err["type"] == "key_overloaded" and refused.headers["retry-after"]
        assert "limit is 4 a key" in err["message"] and "--max-calls-per-key" in err["message"]
        assert stub.requests == 4  # the refusal cost no backend call
        stub.fault = None
        stub.release.set()
        assert (await first).status_code == 200
        assert (await other.post("/v1/systemone", json=body(1))).status_code == 200
    stub.release.clear()


@pytest.mark.parametrize("raw, says", [
    (b'{"model": "m", "state": "\xff", "questions": {}}', "not UTF-8"),
    (b"[" * 5000 + b"]" * 5000, "nests too deep"),
    (b'{"model": "stub-model", "state": "x", "questions": {"spam": {"type": "no', "not JSON"),
    (b"", "JSON object"),
])
async def test_undecodable_bodies_keep_the_gateways_error_shape(stub, raw, says):
    app = create_app(config_for(stub))
    async with client(app) as http:
        resp = await http.post("/v1/systemone", content=raw, headers={"content-type": "application/json"})
    err = the_error(resp)
    assert resp.status_code == 422 and err["type"] == "invalid_request" and says in err["message"], err
    assert not str(err.get("field", "")).isdigit()  # a position is not a field
    assert stub.requests == 0


async def test_truncated_json_names_line_and_column_not_a_field(stub):
    app = create_app(config_for(stub))
    async with client(app) as http:
        resp = await http.post("/v1/systemone", content=b'{"model": "m",\n "state": "x', headers={
            "content-type": "application/json"})
    err = the_error(resp)
    assert "field" not in err and "line 2 column" in err["message"]


async def test_fastapis_own_errors_are_typed(stub):
    app = create_app(config_for(stub))
    async with client(app) as http:
        wrong_method = await http.get("/v1/systemone")
        nowhere = await http.get("/v1/nowhere")
        text_body = await http.post("/v1/systemone", content=b"hello", headers={"content-type": "text/plain"})
    assert wrong_method.status_code == 405 and the_error(wrong_method)["type"] == "method_not_allowed"
    assert wrong_method.headers["allow"] == "POST"
    assert nowhere.status_code == 404 and the_error(nowhere)["type"] == "not_found"
    assert text_body.status_code == 422 and the_error(text_body)["type"] == "invalid_request"
    assert stub.requests == 0


@pytest.mark.parametrize("host", ["attacker.example:8000", "attacker.example", "127.0.0.1.attacker.example",
                                  "10.0.0.5:8000"])
async def test_without_keys_a_foreign_host_header_is_refused(stub, host):
    app = create_app(config_for(stub, api_keys=frozenset()))
    async with client(app, host=host, key=None) as http:
        resp = await http.post("/v1/systemone", json=body(1))
        health = await http.get("/healthz")
    assert resp.status_code == 403 and the_error(resp)["type"] == "host_not_allowed"
    assert health.status_code == 403 and stub.requests == 0


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "localhost", "[::1]:8000", "127.0.0.2"])
async def test_without_keys_loopback_hosts_are_answered(stub, host):
    app = create_app(config_for(stub, api_keys=frozenset()))
    async with client(app, host=host, key=None) as http:
        resp = await http.post("/v1/systemone", json=body(1))
    assert resp.status_code == 200 and stub.requests == 1


async def test_allowed_hosts_and_keyed_gateways_accept_other_names(stub):
    named = create_app(config_for(stub, api_keys=frozenset(), allowed_hosts=frozenset({"decider.internal"})))
    keyed = create_app(config_for(stub))
    async with client(named, host="decider.internal:8000", key=None) as a, client(keyed, host="gw.example") as b:
        assert (await a.post("/v1/systemone", json=body(1))).status_code == 200
        assert (await b.post("/v1/systemone", json=body(1))).status_code == 200


async def test_metrics_are_text_plain_on_the_wire(stub):
    app = create_app(config_for(stub))
    async with client(app) as http:
        resp = await http.get("/metrics")
    assert resp.headers["content-type"].startswith("text/plain") and "jev_gateway_in_flight" in resp.text
