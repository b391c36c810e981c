"""The gateway's operational surface, in process: request ids, health, models, metrics, docs, the access log."""

from __future__ import annotations

import json

import pytest

from jev_shared.gateway import is_loopback, load_keys
from jev_shared.gateway.config import key_id
from tests.gateway.conftest import KEY, MODEL, gateway

SPAM = {"spam": {"type": "noul", "instructions": "This is spam."}}
in_process = pytest.mark.anyio


@in_process
async def test_request_id_is_echoed_when_sane_and_made_otherwise(stub):
    async with gateway(stub) as http:
        given = await http.get("/healthz", headers={"x-request-id": "trace-42"})
        assert given.headers["x-request-id"] == "trace-42" == given.headers["x-typesafe-request-id"]
        made = await http.get("/healthz", headers={"x-request-id": "bad id\twith tabs"})
        assert made.headers["x-request-id"] != "bad id\twith tabs" and len(made.headers["x-request-id"]) == 32
        assert (await http.get("/nowhere")).headers["x-request-id"]


@in_process
async def test_healthz_and_models(stub):
    async with gateway(stub) as http:
        health = await http.get("/healthz", headers={"authorization": ""})  # no key needed: load balancers probe it
        assert health.status_code == 200 and health.json() == {"status": "ok", "ready": True, "models": [MODEL],
                                                               "in_flight": 0}
        listed = (await http.get("/v1/models")).json()
        assert listed["object"] == "list" and [m["id"] for m in listed["data"]] == [MODEL]
        assert [m["name"] for m in listed["models"]] == [MODEL]  # System One's shape, beside OpenAI's
        assert (await http.get("/v1/models", headers={"authorization": ""})).status_code == 401


@in_process
async def test_metrics_count_requests_backend_calls_and_errors(stub):
    async with gateway(stub) as http:
        await http.post("/v1/systemone", json={"model": MODEL, "state": "x truth=yes", "questions": SPAM})
        await http.post("/v1/systemone", json={"model": "nope", "state": "x", "questions": SPAM})
        text = (await http.get("/metrics", headers={"authorization": ""})).text
    assert 'jev_gateway_requests_total{path="/v1/systemone",status="200"}' in text
    assert 'jev_gateway_errors_total{type="model_not_found"}' in text
    assert 'jev_gateway_request_seconds_bucket{le="0.005",path="/v1/systemone"}' in text
    assert f'jev_gateway_backend_calls_total{{model="{MODEL}"}}' in text
    assert "jev_gateway_in_flight 0.0" in text


@in_process
async def test_openapi_documents_the_endpoint(stub):
    async with gateway(stub) as http:
        spec = (await http.get("/openapi.json")).json()
        assert (await http.get("/docs")).status_code == 200
    post = spec["paths"]["/v1/systemone"]["post"]
    assert {"401", "403", "404", "408", "413", "422", "429", "502", "504"} <= set(post["responses"])


@in_process
async def test_access_log_is_one_json_line_per_request_with_the_key_redacted(stub, access_log):
    async with gateway(stub) as http:
        await http.post("/v1/systemone?api_key=" + KEY, json={"model": MODEL, "state": "x", "questions": SPAM},
                        headers={"x-request-id": "log-1", "user-agent": f"tool/{KEY}"})
    lines = [r.getMessage() for r in access_log.records if r.name == "jev_shared.gateway.access"]
    assert lines and all(KEY not in line for line in lines)
    entry = json.loads(next(line for line in lines if '"log-1"' in line))
    assert entry["status"] == 200 and entry["path"] == "/v1/systemone" and entry["model"] == MODEL
    assert entry["key_id"] == key_id(KEY) and entry["n_questions"] == 1 and entry["latency_ms"] > 0


@in_process
async def test_access_log_names_the_error_type(stub, access_log):
    async with gateway(stub) as http:
        await http.post("/v1/systemone", json={"model": "nope", "state": "x", "questions": SPAM},
                        headers={"x-request-id": "log-2"})
        await http.post("/v1/systemone", json={"model": MODEL, "state": "x", "questions": SPAM},
                        headers={"x-request-id": "log-3", "authorization": "Bearer wrong"})
    entries = {json.loads(r.getMessage())["request_id"]: json.loads(r.getMessage()) for r in access_log.records
               if r.name == "jev_shared.gateway.access"}
    assert entries["log-2"]["status"] == 404 and entries["log-2"]["error"] == "model_not_found"
    assert entries["log-3"]["status"] == 401 and entries["log-3"]["error"] == "unauthorized"
    assert "key" not in entries["log-3"] and "wrong" not in json.dumps(entries["log-3"])


@in_process
async def test_without_keys_anyone_on_loopback_may_call(stub):
    async with gateway(stub, api_keys=frozenset()) as http:
        resp = await http.post("/v1/systemone", json={"model": MODEL, "state": "x truth=yes", "questions": SPAM})
    assert resp.status_code == 200 and resp.json()["answers"]["spam"]["noul"] > 0.9


def test_keys_come_from_the_environment_and_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("JEV_API_KEYS", f" {KEY}-a, {KEY}-b ,")
    path = tmp_path / "keys"
    path.write_text(f"# the team's keys\n{KEY}-c\n\n{KEY}-d  # ops\n")
    assert load_keys(path) == {f"{KEY}-{s}" for s in "abcd"}
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.0.0.1")] == [
        True, True, True, False, False]
