"""The gateway posts to its backends over one aiohttp session (``config.backend_posts``): every way a
backend can fail answers the gateway's caller as it did over httpx, the backend receives the same request, and the
aiohttp session is closed at shutdown, with no "Unclosed client session" warning."""

from __future__ import annotations

import gc
import os
import socket
import subprocess
import sys
import warnings
from typing import Any

import openai
import pytest

from jev_shared.backend import Backend
from jev_shared.gateway import Backend as Served
from jev_shared.gateway import config as gateway_config
from jev_shared.gateway.app import create_app
from jev_shared.gateway.backend_posts import AiohttpPosts
from jev_shared.local import LocalServer, free_port
from tests.gateway.conftest import KEY, MODEL, client, config_for
from tests.gateway.crowd import assert_each_got_its_own, crowd, wait_healthy
from tests.gateway.stub import FaultStub
from tests.gateway.test_workers import ROOT, stop
from tests.helpers.wire import Request

SPAM = {"spam": {"type": "noul", "instructions": "This is spam."}}
BODY = {"model": MODEL, "state": "want=yes truth=yes", "questions": SPAM}
#: what each run posts to the backend with: the gateway's own (aiohttp), and (None) the SDK's httpx client
TRANSPORTS = {"aiohttp": gateway_config.backend_posts, "httpx": lambda base_url, http: None}


class Flaky(FaultStub):
    """The stub backend, with two more faults: ``close`` (the connection closed, no reply) and ``partial`` (the
    reply's head and half its body, then the connection closed)."""

    def _write(self, handler: Any, action: Any) -> None:
        if self.fault not in ("close", "partial"):
            return super()._write(handler, action)
        if self.fault == "partial":
            body = action.body[: len(action.body) // 2]
            head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(action.body)}\r\n\r\n"
            handler.wfile.write(head.encode() + body)
            handler.wfile.flush()
        handler.close_connection = True
        handler.connection.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def flaky():
    with Flaky() as backend:
        yield backend


def _refused_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


async def _ask(stub: Flaky, transport: str, monkeypatch: pytest.MonkeyPatch, fault: str | None,
               url: str | None = None, extra: dict[str, Any] | None = None) -> tuple[int, Any, list[Request]]:
    """One request through a gateway of its own whose backend clients post over ``transport``: the status, the
    body (an error's request id left out) and what the backend received."""
    monkeypatch.setattr(gateway_config, "backend_posts", TRANSPORTS[transport])
    stub.reset()
    stub.fault = fault
    config = config_for(stub, cache=False)
    if url is not None:
        config.backends = {MODEL: Served(url, MODEL)}
    app = create_app(config)
    try:
        async with client(app) as http:
            resp = await http.post("/v1/systemone", json={**BODY, **(extra or {})})
            target = Backend.of(app.gateway.pool.get(MODEL).client).http
            assert isinstance(target.http, AiohttpPosts) is (transport == "aiohttp")
    finally:
        stub.release.set()
        stub.release.clear()
    body = resp.json()
    if "error" in body:
        body["error"].pop("request_id", None)
    return resp.status_code, body, list(stub.log)


CASES = {  # fault → (the gateway's status, its error type)
    "refused": (502, "backend_error"),
    "close": (502, "backend_error"),
    "partial": (502, "backend_error"),
    "hang": (504, "backend_timeout"),  # slower than the request's per-attempt timeout
    "500": (502, "backend_error"),
}


@pytest.mark.anyio
@pytest.mark.parametrize("fault", list(CASES))
async def test_each_backend_failure_answers_as_it_did_over_httpx(flaky, monkeypatch, fault):
    """A refused port, a connection closed with no reply or half a reply, a backend slower than the timeout and a
    5xx with a JSON error: the same status and error body from the gateway over aiohttp as over httpx (aiohttp's
    transport maps a refused or dropped connection to httpx's ConnectTimeout: still a connection error here)."""
    url = _refused_url() if fault == "refused" else None
    extra = {"backend": {"timeout_seconds": 0.3}} if fault == "hang" else {}
    seen = {t: await _ask(flaky, t, monkeypatch, None if fault == "refused" else fault, url, extra)
            for t in TRANSPORTS}
    (status, body, _), (status_x, body_x, _) = seen["aiohttp"], seen["httpx"]
    assert (status, body) == (status_x, body_x)
    assert (status, body["error"]["type"]) == CASES[fault], body


#: the request headers that matter to a backend (the rest: host, connection, accept-encoding, content-length)
HEADERS = ("authorization", "content-type", "accept", "user-agent")


@pytest.mark.anyio
async def test_the_backend_receives_the_same_request_over_either(flaky, monkeypatch):
    """Method, path, body bytes and headers (every one, compared by lower-cased name: aiohttp writes the names
    lower-case, httpx as given; the order and the values are the same), no SDK ``x-stainless-*`` header; the
    same answer."""
    (status, body, sent), (status_x, body_x, sent_x) = [await _ask(flaky, t, monkeypatch, None) for t in TRANSPORTS]
    assert status == status_x == 200 and body["answers"] == body_x["answers"]
    assert len(sent) == len(sent_x) >= 1
    for one, other in zip(sent, sent_x, strict=True):
        assert (one.method, one.path, one.raw) == (other.method, other.path, other.raw)
        assert list(one.headers.items()) == list(other.headers.items())
        assert all(one.headers.get(h) for h in HEADERS) and not [h for h in one.headers if h.startswith("x-stainless")]


def test_both_backend_kinds_post_over_aiohttp():
    """A remote backend's client and the embedded server's (``LocalServer.async_client``) alike; the SDK client
    itself keeps its httpx client (for what the engine does not post directly)."""
    srv = LocalServer("smollm2-135m", prompt_cache=False)
    srv.base_url = "http://127.0.0.1:9/v1"
    for served in (Served("http://127.0.0.1:9/v1", MODEL), Served(srv.base_url, MODEL, server=srv)):
        client, posts = served.sdk_client()
        target = Backend.of(client).http
        assert isinstance(target.http, AiohttpPosts) and target.http is posts and target.is_async
        assert isinstance(client._client, openai.DefaultAsyncHttpxClient)  # noqa: SLF001


def test_without_aiohttp_the_backend_keeps_httpx(monkeypatch):
    """aiohttp is the serve extra's: where it cannot be imported the gateway posts with the SDK's httpx client."""
    monkeypatch.setitem(sys.modules, "jev_shared.gateway.backend_posts", None)
    client, posts = Served("http://127.0.0.1:9/v1", MODEL).sdk_client()
    assert posts is None and isinstance(Backend.of(client).http.http, openai.DefaultAsyncHttpxClient)


def test_a_backend_url_with_credentials_keeps_httpx():
    """``http://user:password@host/v1``: httpx sends the URL's credentials as Basic auth; aiohttp refuses them beside
    the Authorization header httpx2 builds from them (nothing sent), so such a backend keeps httpx
    (tests/hostile/test_engine_secrets.py posts through one)."""
    client, posts = Served("http://alice:pw@127.0.0.1:9/v1", MODEL).sdk_client()
    assert posts is None and isinstance(Backend.of(client).http.http, openai.DefaultAsyncHttpxClient)


def _unclosed(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "Unclosed" in str(w.message)]


@pytest.mark.anyio
async def test_an_unclosed_session_would_warn():
    """The check below can fail: an aiohttp client that posted and was not closed warns when collected."""
    with FaultStub() as backend, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        http = AiohttpPosts()
        reply = await http.post(backend.base_url + "/chat/completions", content=b"{}", headers={})
        assert reply.status_code == 200
        del http
        gc.collect()
    assert _unclosed(caught)


@pytest.mark.anyio
@pytest.mark.filterwarnings("error")
async def test_shutdown_closes_the_aiohttp_session(stub):
    """The app's shutdown closes its backend clients' aiohttp sessions: nothing warns when they are collected."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        app = create_app(config_for(stub, cache=False))
        async with client(app) as http:
            assert (await http.post("/v1/systemone", json=BODY)).status_code == 200
            target = Backend.of(app.gateway.pool.get(MODEL).client).http
        assert target.http.is_closed
        del app, target
        gc.collect()
    assert not _unclosed(caught)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_workers_each_close_their_sessions_on_shutdown(stub):
    """``jev serve --workers 2``: each worker posts over its own session, on its own loop, and runs the app's
    shutdown (which closes it, as above) when stopped. A worker's exit does not collect an unclosed session (tried:
    without the close, nothing is said), so this checks that both shutdowns ran and completed."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jev_shared.cli", "serve", "--port", str(port), "--workers", "2", "--backend-url",
         stub.base_url, "--model", MODEL, "--no-cache", "--max-retries", "0", "--log-level", "info"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "JEV_API_KEYS": KEY, "PYTHONPATH": str(ROOT / "src"), "PYTHONWARNINGS": "always"})
    try:
        wait_healthy(proc, f"http://127.0.0.1:{port}", 60)
        results = crowd(f"http://127.0.0.1:{port}", 8, 4, timeout=60)
    finally:
        err = stop(proc)
    assert_each_got_its_own(results, stub, 8 * 4)
    assert proc.returncode == 0 and err.count("Application shutdown complete.") == 2, err[-3000:]
    assert "Unclosed" not in err and "ResourceWarning" not in err, err[-3000:]


@pytest.mark.anyio
async def test_proxies_from_the_environment_apply_as_over_httpx(monkeypatch):
    """httpx reads HTTP_PROXY and its kin; the aiohttp session does where any is set (and skips the per-request
    read of the environment where none is)."""
    for name in [n for n in os.environ if n.lower().endswith("_proxy")]:
        monkeypatch.delenv(name)
    for proxy, trusted in ((None, False), ("http://127.0.0.1:9", True)):
        if proxy:
            monkeypatch.setenv("HTTP_PROXY", proxy)
        posts = AiohttpPosts()
        assert posts._open().trust_env is trusted  # noqa: SLF001
        await posts.aclose()
