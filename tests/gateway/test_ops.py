"""The gateway's operational surface: request ids, health, models, metrics, docs, the access log."""

from __future__ import annotations

import json

import httpx

from jev_shared.gateway import is_loopback, load_keys
from jev_shared.gateway.config import key_id
from tests.gateway.conftest import KEY, MODEL, config_for, running

SPAM = {"spam": {"type": "noul", "instructions": "This is spam."}}


def test_request_id_is_echoed_when_sane_and_made_otherwise(http):
    given = http.get("/healthz", headers={"x-request-id": "trace-42"})
    assert given.headers["x-request-id"] == "trace-42" == given.headers["x-typesafe-request-id"]
    made = http.get("/healthz", headers={"x-request-id": "bad id\twith tabs"})
    assert made.headers["x-request-id"] != "bad id\twith tabs" and len(made.headers["x-request-id"]) == 32
    assert http.get("/nowhere").headers["x-request-id"]


def test_healthz_and_models(gateway_url, http):
    health = httpx.get(gateway_url + "/healthz")  # no key needed: load balancers probe it
    assert health.status_code == 200 and health.json() == {"status": "ok", "ready": True, "models": [MODEL],
                                                       "in_flight": 0}
    listed = http.get("/v1/models").json()
    assert listed["object"] == "list" and [m["id"] for m in listed["data"]] == [MODEL]
    assert [m["name"] for m in listed["models"]] == [MODEL]  # System One's shape, beside OpenAI's
    assert httpx.get(gateway_url + "/v1/models").status_code == 401


def test_metrics_count_requests_backend_calls_and_errors(gateway_url, http, stub):
    http.post("/v1/systemone", json={"model": MODEL, "state": "x truth=yes", "questions": SPAM})
    http.post("/v1/systemone", json={"model": "nope", "state": "x", "questions": SPAM})
    text = httpx.get(gateway_url + "/metrics").text
    assert 'jev_gateway_requests_total{path="/v1/systemone",status="200"}' in text
    assert 'jev_gateway_errors_total{type="model_not_found"}' in text
    assert 'jev_gateway_request_seconds_bucket{le="0.005",path="/v1/systemone"}' in text
    assert f'jev_gateway_backend_calls_total{{model="{MODEL}"}}' in text
    assert "jev_gateway_in_flight 0.0" in text


def test_openapi_documents_the_endpoint(gateway_url):
    spec = httpx.get(gateway_url + "/openapi.json").json()
    post = spec["paths"]["/v1/systemone"]["post"]
    assert {"401", "404", "413", "422", "429", "502", "504"} <= set(post["responses"])
    assert httpx.get(gateway_url + "/docs").status_code == 200


def test_access_log_is_one_json_line_per_request_with_the_key_redacted(http, access_log, stub):
    http.post("/v1/systemone?api_key=" + KEY, json={"model": MODEL, "state": "x", "questions": SPAM},
              headers={"x-request-id": "log-1", "user-agent": f"tool/{KEY}"})
    lines = [r.getMessage() for r in access_log.records if r.name == "jev_shared.gateway.access"]
    assert lines and all(KEY not in line for line in lines)
    entry = json.loads(next(line for line in lines if '"log-1"' in line))
    assert entry["status"] == 200 and entry["path"] == "/v1/systemone" and entry["model"] == MODEL
    assert entry["key_id"] == key_id(KEY) and entry["n_questions"] == 1 and entry["latency_ms"] > 0


def test_access_log_names_the_error_type(http, access_log):
    http.post("/v1/systemone", json={"model": "nope", "state": "x", "questions": SPAM},
              headers={"x-request-id": "log-2"})
    entry = json.loads(next(r.getMessage() for r in access_log.records if '"log-2"' in r.getMessage()))
    assert entry["status"] == 404 and entry["error"] == "model_not_found"


def test_without_keys_anyone_on_loopback_may_call(stub):
    with running(config_for(stub, api_keys=frozenset())) as url:
        resp = httpx.post(url + "/v1/systemone", json={"model": MODEL, "state": "x truth=yes", "questions": SPAM})
        assert resp.status_code == 200 and resp.json()["answers"]["spam"]["noul"] > 0.9


def test_keys_come_from_the_environment_and_a_file(tmp_path, monkeypatch):
    monkeypatch.setenv("JEV_API_KEYS", f" {KEY}-a, {KEY}-b ,")
    path = tmp_path / "keys"
    path.write_text(f"# the team's keys\n{KEY}-c\n\n{KEY}-d  # ops\n")
    assert load_keys(path) == {f"{KEY}-{s}" for s in "abcd"}
    assert [is_loopback(h) for h in ("127.0.0.1", "::1", "localhost", "0.0.0.0", "10.0.0.1")] == [
        True, True, True, False, False]
