"""Gateway fixtures: a fault-injecting stub backend; the gateway in process (``httpx.ASGITransport``,
for the contract tests) and under uvicorn on loopback (for SDK, slow-client, CLI and load tests)."""

from __future__ import annotations

import asyncio
import gc
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, contextmanager, nullcontext

import httpx
import pytest

from jev_shared.gateway import Backend, GatewayConfig
from jev_shared.gateway.app import create_app
from jev_shared.gateway.runner import BackgroundServer
from tests.gateway.stub import FaultStub


@pytest.fixture(autouse=True)
def _collect_before_each_test():
    """Finalise what earlier tests left (SDK clients whose ``__del__`` schedules their ``aclose`` on
    whatever loop is running) before this test's event loop starts, not inside it: such a close,
    of a client bound to a loop already closed, raised "Event loop is closed" in a later test."""
    gc.collect()
    yield


#: Built at run time: no key-shaped literal in the tests.
KEY = "gw-" + secrets.token_hex(16)
MODEL = "stub-model"


@pytest.fixture(scope="session")
def stub_backend():
    with FaultStub() as stub:
        yield stub


@pytest.fixture
def stub(stub_backend):
    stub_backend.reset()
    yield stub_backend
    stub_backend.reset()


def config_for(stub: FaultStub, **kw) -> GatewayConfig:
    defaults = {"api_keys": frozenset({KEY}), "max_retries": 0, "max_body_bytes": 20_000}
    return GatewayConfig(backends={MODEL: Backend(stub.base_url, MODEL)}, **{**defaults, **kw})


@contextmanager
def running(config: GatewayConfig):
    with BackgroundServer(create_app(config)) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def gateway_url(stub_backend):
    """The shared gateway: keys on, no engine retries (faults show at once), a 20 kB body limit."""
    with running(config_for(stub_backend)) as url:
        yield url


@pytest.fixture
def access_log(caplog):
    caplog.set_level(logging.INFO, logger="jev_shared.gateway.access")
    return caplog


@pytest.fixture
def anyio_backend():
    return "asyncio"


@asynccontextmanager
async def lifespan(app) -> AsyncIterator[None]:
    """The app's start-up and shutdown, as uvicorn runs them (ASGITransport does not)."""
    inbox: asyncio.Queue = asyncio.Queue()
    outbox: asyncio.Queue = asyncio.Queue()
    task = asyncio.create_task(app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put))
    await inbox.put({"type": "lifespan.startup"})
    assert (await outbox.get())["type"] == "lifespan.startup.complete"
    try:
        yield
    finally:
        await inbox.put({"type": "lifespan.shutdown"})
        await outbox.get()
        await task


@asynccontextmanager
async def client(app, host: str = "127.0.0.1:8000", key: str | None = KEY,
                 start: bool = True) -> AsyncIterator[httpx.AsyncClient]:
    """An HTTP client on ``app`` in process; the app started and, after, shut down (its engine clients
    closed), unless ``start`` is False (a second client on an app already started)."""
    headers = {"authorization": f"Bearer {key}"} if key else {}
    async with lifespan(app) if start else nullcontext(), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=f"http://{host}", headers=headers) as http:
        yield http


@asynccontextmanager
async def gateway(stub: FaultStub, **config) -> AsyncIterator[httpx.AsyncClient]:
    """A gateway of its own (keys on, no engine retries, a 20 kB body limit) on ``stub``, in process."""
    async with client(create_app(config_for(stub, **config))) as http:
        yield http
