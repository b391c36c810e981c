"""POST /v1/systemone: the engine's own systemone client over real HTTP (uvicorn), then the answer
shape and every error in process (``httpx.ASGITransport``), each asserting what reached the stub."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from jev_shared import Choice, InvalidQuestionError, Noul, ProviderError, Score, SystemOneClient
from tests.gateway.conftest import KEY, MODEL, gateway

QUESTIONS = {
    "team": {"type": "choice", "instructions": "Which team?",
             "criteria": {"billing": "payments", "technical": "bugs", "sales": "pricing"}},
    "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["can wait", "today", "now"]},
    "spam": {"type": "noul", "instructions": "This is spam."},
}


async def ask(http: httpx.AsyncClient, state="ticket want=technical truth=no", questions=None,
              **extra) -> httpx.Response:
    return await http.post("/v1/systemone", json={"model": MODEL, "state": state, "questions": questions or QUESTIONS,
                                                  **extra})


def test_engine_systemone_client_against_the_gateway(gateway_url, stub):
    client = SystemOneClient(openai.OpenAI(base_url=gateway_url + "/v1", api_key=KEY), model=MODEL, api="systemone")
    resp = client.system_one("I was charged twice want=billing truth=yes", {
        "team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"}),
        "urgency": Score(instructions="How urgent?", criteria=["can wait", "today", "now"]),
        "spam": Noul(instructions="This is spam."),
    })
    assert list(resp.answers) == ["team", "urgency", "spam"]
    assert resp.answers["team"].choice == "billing" and resp.answers["spam"].noul > 0.9
    assert 0 <= resp.answers["urgency"].score <= 2 and resp.usage.input_tokens == 150
    assert stub.requests == 3  # one backend call per question


def test_engine_client_reads_the_gateways_422_as_invalid_question(gateway_url, stub):
    client = SystemOneClient(openai.OpenAI(base_url=gateway_url + "/v1", api_key=KEY), model=MODEL, api="systemone")
    with pytest.raises(InvalidQuestionError) as info:
        client.system_one("x", {"ok": Noul(instructions="fine"),
                                "bad": {"type": "score", "instructions": "x", "criteria": ["only one"]}})
    assert (info.value.question_id, info.value.field) == ("bad", "criteria")
    assert stub.requests == 0


def test_engine_client_reports_the_gateway_request_id_on_errors(gateway_url):
    client = SystemOneClient(openai.OpenAI(base_url=gateway_url + "/v1", api_key="wrong-" + KEY), model=MODEL,
                             api="systemone")
    with pytest.raises(ProviderError) as info:
        client.system_one("x", {"spam": Noul(instructions="spam")})
    # the engine's 401 mapping keeps the request id in the message only (its .request_id is None)
    assert info.value.status_code == 401 and "request id " in str(info.value) and KEY not in str(info.value)


in_process = pytest.mark.anyio


@in_process
async def test_answer_shape_is_the_engines_model_dump(stub):
    async with gateway(stub) as http:
        resp = await ask(http)
    assert resp.status_code == 200
    body = resp.json()
    assert body["model"] == MODEL and list(body["answers"]) == ["team", "urgency", "spam"]
    assert body["answers"]["team"]["choice"] == "technical" and body["answers"]["spam"]["noul"] < 0.1
    assert set(body["answers"]["urgency"]) == {"type", "score", "legend", "probabilities", "confidence"}
    assert "debug" not in body and body["usage"]["n_calls"] == 3
    assert resp.headers["x-request-id"] == resp.headers["x-typesafe-request-id"]


@in_process
async def test_options_reach_the_backend_nested_or_flat(stub):
    async with gateway(stub) as http:
        assert (await ask(http, questions={"spam": QUESTIONS["spam"]}, backend={"top_logprobs": 5},
                          request={"prompt_layout": "split", "total_timeout_seconds": 20})).status_code == 200
        sent = stub.bodies[-1]
        assert sent["top_logprobs"] == 5 and sent["max_tokens"] == 1 and len(sent["messages"]) == 3  # split: 2 users
        assert (await ask(http, questions={"spam": QUESTIONS["spam"]}, top_logprobs=7)).status_code == 200
    assert stub.bodies[-1]["top_logprobs"] == 7


@in_process
async def test_conflicting_options_are_a_422(stub):
    async with gateway(stub) as http:
        resp = await ask(http, top_logprobs=5, backend={"top_logprobs": 6})
    assert resp.status_code == 422 and resp.json()["error"]["field"] == "backend.top_logprobs"
    assert stub.requests == 0


@in_process
async def test_401_without_or_with_a_wrong_key(stub):
    async with gateway(stub) as keyed:
        for headers in ({"authorization": ""}, {"authorization": "Bearer nope-" + KEY}, {"authorization": KEY}):
            resp = await keyed.post("/v1/systemone", headers=headers,
                                    json={"model": MODEL, "state": "x", "questions": QUESTIONS})
            assert resp.status_code == 401 and resp.json()["error"]["type"] == "unauthorized"
            assert resp.headers["www-authenticate"] == "Bearer" and resp.headers["x-request-id"]
    assert stub.requests == 0


@in_process
@pytest.mark.parametrize("question, field", [
    ({"type": "choice", "instructions": "x", "criteria": {}}, "criteria"),
    ({"type": "score", "instructions": "x", "criteria": ["a"]}, "criteria"),
    ({"type": "noul", "instructions": "  "}, "instructions"),
    ({"type": "noul", "instructions": "x", "criteria": {"maybe": "?"}}, "criteria"),
    ({"type": "vote", "instructions": "x"}, None),
])
async def test_422_names_question_and_field_with_no_backend_call(stub, question, field):
    async with gateway(stub) as http:
        resp = await ask(http, questions={"ok": QUESTIONS["spam"], "bad": question})
    err = resp.json()["error"]
    assert resp.status_code == 422 and err["type"] == "invalid_question" and err["question_id"] == "bad"
    if field:
        assert err["field"] == f"questions.bad.{field}"
    assert stub.requests == 0


@in_process
async def test_422_for_a_bad_state_or_body(stub):
    async with gateway(stub) as http:
        assert (await ask(http, state="")).json()["error"]["field"] == "state"
        resp = await http.post("/v1/systemone", content=b"{not json", headers={"content-type": "application/json"})
        assert resp.status_code == 422 and resp.json()["error"]["type"] == "invalid_request"
        resp = await ask(http, surprise=1)
        assert resp.status_code == 422 and resp.json()["error"]["field"] == "surprise"
    assert stub.requests == 0


@in_process
async def test_413_over_the_body_limit(stub):
    async def chunks():  # chunked: no content-length
        for _ in range(3):
            yield b'{"model": "m", "state": "' + b"y" * 10_000

    async with gateway(stub) as http:
        resp = await ask(http, state="x" * 30_000)
        assert resp.status_code == 413 and resp.json()["error"]["type"] == "payload_too_large"
        assert resp.headers["connection"] == "close"
        assert (await http.post("/v1/systemone", content=chunks())).status_code == 413
    assert stub.requests == 0


@in_process
async def test_404_for_an_unknown_model(stub):
    async with gateway(stub) as http:
        resp = await http.post("/v1/systemone", json={"model": "nope", "state": "x", "questions": QUESTIONS})
    assert resp.status_code == 404 and resp.json()["error"] == {
        "type": "model_not_found", "field": "model", "message": f"the gateway serves no model 'nope'; it serves ['{MODEL}']"}


@in_process
async def test_429_with_retry_after_when_the_backend_throttles(stub):
    stub.fault = "429"
    async with gateway(stub) as http:
        resp = await ask(http)
    assert resp.status_code == 429 and resp.headers["retry-after"] == "7"
    assert resp.json()["error"]["type"] == "rate_limited"


@in_process
async def test_502_when_the_backend_fails(stub):
    stub.fault = "500"
    async with gateway(stub) as http:
        resp = await ask(http)
    assert resp.status_code == 502 and resp.json()["error"]["type"] == "backend_error"
    assert "the backend broke" in resp.json()["error"]["message"]


@in_process
async def test_504_when_the_request_runs_out_of_time(stub):
    stub.fault = "hang"
    try:
        async with gateway(stub) as http:
            resp = await ask(http, request={"total_timeout_seconds": 0.3})
            assert resp.status_code == 504 and resp.json()["error"]["type"] == "timeout"
            resp = await ask(http, questions={"spam": QUESTIONS["spam"]}, backend={"timeout_seconds": 0.3})
            assert resp.status_code == 504 and resp.json()["error"]["type"] == "backend_timeout"
    finally:
        stub.release.set()
        stub.release.clear()


@in_process
async def test_429_when_the_gateways_queue_is_full(stub):
    stub.fault = "hang"
    body = {"model": MODEL, "state": "x", "questions": {"spam": QUESTIONS["spam"]}}
    async with gateway(stub, max_in_flight=1) as http:
        first = asyncio.create_task(http.post("/v1/systemone", json=body))
        while stub.requests == 0:  # the first request holds the only slot, waiting on the backend
            await asyncio.sleep(0.01)
        resp = await http.post("/v1/systemone", json=body)
        assert resp.status_code == 429 and resp.headers["retry-after"] == "1"
        assert resp.json()["error"]["type"] == "overloaded" and stub.requests == 1
        stub.fault = None
        stub.release.set()
        assert (await first).status_code == 200
    stub.release.clear()


@in_process
async def test_error_bodies_never_carry_the_key(stub):
    stub.fault = "500"
    async with gateway(stub) as http:
        resp = await ask(http, state=f"my key is {KEY}")
    assert KEY not in resp.text and json.loads(resp.text)["error"]["type"] == "backend_error"
