"""The warm start in the gateway and on the command line: one engine client and one memory per model, the per-user
cache by default (``--no-cache`` / ``JEV_NO_CACHE=1`` to opt out), ``jev serve --warm`` with
``/healthz`` ready only after, and the same distribution from the library, ``jev decide`` and
``jev serve`` for the same question on the same backend.
"""

from __future__ import annotations

import asyncio
import json
import os
from types import SimpleNamespace

import httpx
import openai
import pytest

from jev_shared import SystemOneClient
from jev_shared.backend import describe
from jev_shared.gateway import Backend, GatewayConfig
from jev_shared.gateway.app import create_app
from jev_shared.local import DEFAULT_MODEL
from jev_shared.memory import backend_fingerprint
from tests.gateway.conftest import KEY, MODEL, client, config_for
from tests.gateway.test_cli import jev, start_serve

SPAM = {"spam": {"type": "noul", "instructions": "This is spam."}}
TEAM = {"team": {"type": "choice", "instructions": "Which team?",
                 "criteria": {"billing": "payments", "technical": "bugs", "sales": "pricing"}}}


@pytest.mark.anyio
async def test_one_engine_client_serves_every_option_set(stub):
    app = create_app(config_for(stub))
    pool = app.gateway.pool
    variants = [{}, {"backend": {"top_logprobs": 5}}, {"request": {"prompt_layout": "split"}},
                {"backend": {"max_concurrency": 2}}, {"top_logprobs": 7, "request": {"prompt_layout": "fused"}}]
    async with client(app) as http:
        for extra in variants:
            resp = await http.post("/v1/systemone", json={"model": MODEL, "state": "x want=billing", "questions": TEAM,
                                                          **extra})
            assert resp.status_code == 200, resp.text
    assert pool.n_clients == 1  # was one client per option set (up to 17 per model)
    assert [b["top_logprobs"] for b in stub.bodies] == [20, 5, 20, 20, 7]  # each request's own options went out
    assert len(stub.bodies[2]["messages"]) == 3  # split: the state in its own message


@pytest.mark.anyio
async def test_a_per_attempt_timeout_twin_shares_the_models_memory(stub):
    app = create_app(config_for(stub))
    pool = app.gateway.pool
    async with client(app) as http:
        for extra in ({}, {"backend": {"timeout_seconds": 5}}):
            body = {"model": MODEL, "state": "x", "questions": SPAM, **extra}
            assert (await http.post("/v1/systemone", json=body)).status_code == 200
    assert pool.n_clients == 2 and pool.get(MODEL).memory is pool.get(MODEL, 5).memory is pool.memory


@pytest.mark.anyio
async def test_warm_prepares_at_start_up_and_healthz_is_ready_only_after(stub):
    stub.fault = "hang"
    app = create_app(config_for(stub, warm={**SPAM, **TEAM}))
    async with client(app) as http:
        for _ in range(300):
            if stub.requests:
                break
            await asyncio.sleep(0.01)
        warming = await http.get("/healthz")
        assert warming.status_code == 503 and warming.json()["ready"] is False
        assert warming.json()["status"] == "warming"
        stub.fault = None
        stub.release.set()
        for _ in range(300):
            ready = await http.get("/healthz")
            if ready.status_code == 200:
                break
            await asyncio.sleep(0.02)
    stub.release.clear()
    assert ready.json()["ready"] is True and ready.json()["status"] == "ok"
    assert app.gateway.warmed[MODEL]["questions"] == ["spam", "team"] and stub.requests == 2


@pytest.mark.slow
def test_jev_serve_warm_prints_what_it_prepared(stub, tmp_path):
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(SPAM))
    proc, url = start_serve("--backend-url", stub.base_url, "--model", "m", "--warm", str(questions), "--no-cache")
    try:
        health = httpx.get(url + "/healthz").json()
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert health["ready"] is True
    assert "warmed m: prepared 1 question(s): 1 call(s), 0 for the priors" in err


@pytest.mark.slow
def test_jev_decide_keeps_memory_in_the_user_cache_unless_no_cache(stub, tmp_path):
    cache = tmp_path / "memory.json"
    env = {"JEV_NO_CACHE": "", "JEV_MEMORY_FILE": str(cache)}
    args = ["decide", "--state", "x truth=yes", "--questions", json.dumps(SPAM), "--backend-url", stub.base_url,
            "--model", "m"]
    assert jev(*args, "--no-cache", env=env).returncode == 0 and not cache.exists()
    assert jev(*args, env={**env, "JEV_NO_CACHE": "1"}).returncode == 0 and not cache.exists()
    out = jev(*args, env=env)
    assert out.returncode == 0, out.stderr
    saved = json.loads(cache.read_text())
    assert saved and "x truth=yes" not in cache.read_text() and KEY not in cache.read_text()


def _library(base_url: str, model: str, questions: dict, state: str) -> dict:
    client = SystemOneClient(openai.OpenAI(base_url=base_url, api_key="unused"), model=model, api="chat_completions")
    return client.system_one(state, questions).model_dump(mode="json")["answers"]


async def _gateway(base_url: str, model: str, questions: dict, state: str) -> dict:
    app = create_app(GatewayConfig(backends={model: Backend(base_url, model)}, cache=False))
    async with client(app, key=None) as http:
        resp = await http.post("/v1/systemone", json={"model": model, "state": state, "questions": questions})
    assert resp.status_code == 200, resp.text
    return resp.json()["answers"]


def _decide(base_url: str, model: str, questions: dict, state: str) -> dict:
    out = jev("decide", "--state", state, "--questions", json.dumps(questions), "--backend-url", base_url,
              "--model", model)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["answers"]


def _same(*answers: dict, tol: float = 1e-9) -> None:
    first = answers[0]
    for other in answers[1:]:
        assert set(other) == set(first)
        for qid, ans in first.items():
            got = other[qid]
            probs = ans.get("probabilities") or {"noul": ans["noul"]}
            theirs = got.get("probabilities") or {"noul": got["noul"]}
            assert set(probs) == set(theirs) and all(abs(probs[k] - theirs[k]) <= tol for k in probs), (ans, got)


@pytest.mark.slow
def test_library_decide_and_serve_give_the_same_distribution(stub):
    state, questions = "a ticket want=technical truth=no", {**TEAM, **SPAM}
    _same(_library(stub.base_url, "m", questions, state), _decide(stub.base_url, "m", questions, state),
          asyncio.run(_gateway(stub.base_url, "m", questions, state)))


@pytest.mark.slow
@pytest.mark.live
def test_library_decide_and_serve_agree_on_the_embedded_model(local_server):
    state = "I was charged twice, please refund."
    questions = {**TEAM, **SPAM}
    base, model = local_server.base_url, local_server.model
    _library(base, model, questions, state)  # llama.cpp reads a prompt it has cached with slightly other numbers
    _same(_library(base, model, questions, state), _decide(base, model, questions, state),
          asyncio.run(_gateway(base, model, questions, state)), tol=1e-6)


def test_no_cache_env_is_honoured_by_the_gateway(stub, monkeypatch):
    monkeypatch.setenv("JEV_NO_CACHE", "1")
    app = create_app(config_for(stub))
    assert app.gateway.pool.memory.path is None
    monkeypatch.setenv("JEV_NO_CACHE", "")
    monkeypatch.setenv("JEV_MEMORY_FILE", os.devnull + ".not-used")
    assert create_app(config_for(stub, cache=False)).gateway.pool.memory.path is None


@pytest.mark.slow
def test_a_second_jev_serve_on_the_same_cache_makes_no_prior_calls(stub, tmp_path):
    """The embedded default model's name turns debias on (3 prior calls a question); the first process
    warms and saves them, the second reads them from the per-user cache file."""
    questions = tmp_path / "q.json"
    questions.write_text(json.dumps(SPAM))
    env = {"JEV_NO_CACHE": "", "JEV_MEMORY_FILE": str(tmp_path / "memory.json")}
    said = []
    for _ in range(2):
        proc, url = start_serve("--backend-url", stub.base_url, "--model", "qwen2.5-coder-0.5b", "--warm",
                                str(questions), env=env)
        try:
            assert httpx.get(url + "/healthz").json()["ready"] is True
        finally:
            proc.terminate()
            said.append(proc.communicate(timeout=30)[1])
    assert "prepared 1 question(s): 4 call(s), 3 for the priors" in said[0], said[0]
    assert "prepared 1 question(s): 1 call(s), 0 for the priors" in said[1], said[1]


@pytest.mark.qwen
@pytest.mark.slow
def test_jev_decide_on_the_embedded_model_carries_the_servers_marks(tmp_path):
    """``jev decide`` without ``--backend-url`` builds its client as ``srv.client()`` does: the memory is
    kept under the server's stable name (the library's), and its zero-shot prompts as kept prompts
    beside the memory file; ``--no-cache`` keeps neither."""
    args = ("decide", "--state", "I was charged twice.", "--questions", json.dumps(SPAM))
    cache = tmp_path / "memory.json"
    out = jev(*args, env={"JEV_NO_CACHE": "", "JEV_MEMORY_FILE": str(cache)})
    assert out.returncode == 0, out.stderr
    library = backend_fingerprint(describe(SimpleNamespace(), name=f"embedded-llama.cpp:{DEFAULT_MODEL}"))
    assert list(json.loads(cache.read_text())["backends"]) == [library]  # the library's LocalServer key
    assert len(list((tmp_path / "slots" / DEFAULT_MODEL).glob("*.bin"))) == 1  # the default model's folder
    bare = tmp_path / "bare"
    out = jev(*args, "--no-cache", env={"JEV_NO_CACHE": "", "JEV_MEMORY_FILE": str(bare / "memory.json")})
    assert out.returncode == 0, out.stderr
    assert not bare.exists()
