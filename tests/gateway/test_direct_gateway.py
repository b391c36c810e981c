"""The gateway's engine clients post with their own HTTP client directly (direct.py): past the SDK's
request machinery, the per-attempt timeout of a request's twin still applied, the HTTP client closed at shutdown."""

from __future__ import annotations

import time

import pytest

from jev_shared.backend import Backend
from jev_shared.direct import HttpTarget
from jev_shared.gateway import Backend as Served
from jev_shared.gateway.app import create_app
from jev_shared.local import LocalServer
from tests.gateway.conftest import MODEL, client, config_for

SPAM = {"spam": {"type": "noul", "instructions": "This is spam."}}


def _target(engine: object) -> HttpTarget:
    target = Backend.of(engine.client).http  # type: ignore[attr-defined]
    assert isinstance(target, HttpTarget) and target.is_async and target.serves(engine.client)  # type: ignore[attr-defined]
    return target


@pytest.mark.slow
@pytest.mark.anyio
async def test_requests_go_out_through_the_direct_post_and_twins_keep_their_timeout(stub):
    """One model client and its 0.3 s twin share one HTTP client; neither request carries the SDK's own headers
    (it did not go through the SDK's post); the twin's hanging backend call ends at its 0.3 s, not the 60 s default."""
    app = create_app(config_for(stub, api_keys=frozenset({"gw-key-0123456789"})))
    pool = app.gateway.pool
    async with client(app, key="gw-key-0123456789") as http:
        body = {"model": MODEL, "state": "x", "questions": SPAM}
        assert (await http.post("/v1/systemone", json=body)).status_code == 200
        stub.fault = "hang"
        try:
            started = time.monotonic()
            resp = await http.post("/v1/systemone", json={**body, "backend": {"timeout_seconds": 0.3}})
            elapsed = time.monotonic() - started
        finally:
            stub.release.set()
            stub.release.clear()
        assert resp.status_code == 504 and resp.json()["error"]["type"] == "backend_timeout"
        assert elapsed < 5.0
        plain, twin = _target(pool.get(MODEL)), _target(pool.get(MODEL, 0.3))
        assert plain is twin and pool.get(MODEL, 0.3).client.timeout == 0.3
    sent = stub.log[0].headers
    assert sent["authorization"] == "Bearer unused" and not [h for h in sent if h.startswith("x-stainless")]
    assert plain.http.is_closed  # the lifespan's shutdown closed the HTTP client with its openai client


def test_a_local_server_backend_keeps_what_the_server_attaches_and_posts_directly(stub):
    """A ``LocalServer`` behind the gateway: its Backend (name, surfaces, tokenizer, cache policy) and the target."""
    srv = LocalServer("smollm2-135m", prompt_cache=False)
    srv.base_url = stub.base_url
    config = config_for(stub)
    config.backends = {MODEL: Served(srv.base_url, MODEL, server=srv)}
    engine = create_app(config).gateway.pool.get(MODEL)
    known = Backend.of(engine.client)
    assert known.name == srv.backend_name and known.surfaces == ("chat_completions",) and known.user_cache
    assert _target(engine).base_url == stub.base_url.rstrip("/") + "/"
