"""Gateway fixtures: a fault-injecting stub backend, and the gateway under uvicorn on loopback."""

from __future__ import annotations

import logging
import secrets
from contextlib import contextmanager

import httpx
import pytest

from jev_shared.gateway import Backend, GatewayConfig
from jev_shared.gateway.app import create_app
from jev_shared.gateway.runner import BackgroundServer
from tests.gateway.stub import FaultStub

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


@pytest.fixture(scope="session")
def faulty_url(stub_backend):
    """A gateway of its own for backend-fault tests, so what its engine learns from faulty backends
    (refused fields, surfaces) never leaks into the tests that share the main gateway."""
    with running(config_for(stub_backend)) as url:
        yield url


def client_for(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=30)


@pytest.fixture
def http(gateway_url):
    with client_for(gateway_url) as client:
        yield client


@pytest.fixture
def faulty(faulty_url):
    with client_for(faulty_url) as client:
        yield client


@pytest.fixture
def access_log(caplog):
    caplog.set_level(logging.INFO, logger="jev_shared.gateway.access")
    return caplog
