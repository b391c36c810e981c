"""The gateway in front of the embedded SmolLM2 llama.cpp server (real weights, real server)."""

from __future__ import annotations

import httpx
import openai
import pytest

from jev_shared import Choice, Noul, Score, SystemOneClient
from jev_shared.gateway import Backend, GatewayConfig
from tests.gateway.conftest import KEY, running

pytestmark = pytest.mark.live

QUESTIONS = {
    "team": Choice(instructions="Which team should handle this ticket?",
                   criteria={"billing": "Invoices and refunds", "technical": "Bugs and errors"}),
    "urgency": Score(instructions="How urgent is it?", criteria=["can wait", "soon", "now"]),
    "spam": Noul(instructions="This ticket is spam."),
}


@pytest.fixture(scope="module")
def live_gateway(local_server):
    config = GatewayConfig(backends={local_server.model: Backend(local_server.base_url, local_server.model, "local")},
                           api_keys=frozenset({KEY}))
    with running(config) as url:
        yield url, local_server.model


@pytest.mark.slow
def test_engine_client_through_the_gateway_to_the_embedded_model(live_gateway):
    url, model = live_gateway
    client = SystemOneClient(openai.OpenAI(base_url=url + "/v1", api_key=KEY), model=model, api="systemone")
    resp = client.system_one("The app crashes with error 500 on the settings page.", QUESTIONS)
    assert list(resp.answers) == ["team", "urgency", "spam"]
    assert sum(resp.answers["team"].probabilities.values()) == pytest.approx(1.0)
    assert 0 <= resp.answers["urgency"].score <= 2 and 0 <= resp.answers["spam"].noul <= 1
    assert resp.usage.input_tokens and resp.usage.output_tokens == 3


@pytest.mark.slow
def test_raw_request_with_options_to_the_embedded_model(live_gateway):
    url, model = live_gateway
    body = {"model": model, "state": "Refund me twice.", "request": {"prompt_layout": "fused"},
            "backend": {"top_logprobs": 10, "max_concurrency": 2},
            "questions": {k: q.model_dump(exclude_none=True) for k, q in QUESTIONS.items()}}
    resp = httpx.post(url + "/v1/systemone", json=body, headers={"authorization": f"Bearer {KEY}"}, timeout=60)
    assert resp.status_code == 200, resp.text
    assert resp.json()["answers"]["team"]["choice"] in ("billing", "technical")
    assert resp.json()["usage"]["n_calls"] == 3


def test_an_embedded_backends_engine_client_carries_the_servers_marks(local_server):
    """``jev serve`` on the embedded model: the engine clients are built as ``srv.client()``'s (its tokenizer
    counts a preview's tokens, under the timeout twin too); a plain backend's are not."""
    from jev_shared.gateway.app import create_app

    marked = Backend(local_server.base_url, local_server.model, "local", server=local_server)
    plain = Backend(local_server.base_url, local_server.model, "local")
    for backend, counted in ((marked, True), (plain, False)):
        pool = create_app(GatewayConfig(backends={backend.model: backend}, cache=False)).gateway.pool
        for engine in (pool.get(backend.model), pool.get(backend.model, 5.0)):
            [first] = engine.preview("x", {"spam": QUESTIONS["spam"]})
            assert (first["input_tokens"] is not None) is counted
