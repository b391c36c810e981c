"""``examples/deploy/nginx.conf`` in front of the gateway, over loopback: the bounds that live in the proxy.

uvicorn bounds neither how long a client may take over its request head nor how many requests one
client address holds; the shipped nginx example does (``client_header_timeout``, ``limit_conn`` per
address, ``client_max_body_size``). Here it runs as shipped, its timeouts set small (1 s) so the tests
are quick; tests/hostile/test_gateway_connections.py runs its per-client cap. Skipped, saying so,
where nginx is not installed (.ci/run installs it).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request

import pytest

from tests.gateway.conftest import KEY, MODEL, config_for, running
from tests.gateway.proxy import needs_nginx, nginx
from tests.gateway.test_slow_clients import SLACK_S, TRICKLE_S, connect, request_head, trickle

pytestmark = [needs_nginx, pytest.mark.timeout(120)]
HEADER_S = 1.0


@pytest.fixture(scope="module")
def proxied(stub_backend):
    with running(config_for(stub_backend)) as upstream, nginx(upstream, client_header_timeout="1s") as url:
        yield url


def test_a_decision_is_answered_through_the_proxy(proxied):
    body = {"model": MODEL, "state": "I was charged twice", "questions": {"spam": {"type": "noul",
                                                                                    "instructions": "This is spam."}}}
    req = urllib.request.Request(proxied + "/v1/systemone", data=json.dumps(body).encode(), method="POST",
                                 headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        assert resp.status == 200 and "spam" in json.loads(resp.read())["answers"]


def test_trickled_headers_are_closed_by_the_proxy_in_time(proxied, stub):
    before = stub.requests
    took, got = trickle(connect(proxied), request_head(10) + b"x" * 10)
    assert HEADER_S - 0.1 <= took < HEADER_S + SLACK_S, took
    assert not got.startswith(b"HTTP/1.1 2") and stub.requests == before


def test_forty_trickling_clients_are_all_closed_in_time(proxied):
    """The slow-client probe: 40 connections trickling headers, each closed within the bound."""
    results: list[tuple[float, bytes]] = []

    def one() -> None:
        results.append(trickle(connect(proxied), request_head(10) + b"x" * 10))

    threads = [threading.Thread(target=one) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(results) == 40
    assert max(took for took, _ in results) < HEADER_S + 2 * SLACK_S  # 40 threads share the CPUs


def test_an_idle_connection_that_never_sends_is_closed(proxied):
    sock = connect(proxied)
    started = time.monotonic()
    sock.settimeout(HEADER_S + 5)
    while sock.recv(65536):
        pass
    took = time.monotonic() - started
    sock.close()
    assert took < HEADER_S + SLACK_S


def test_a_body_over_the_proxys_limit_is_refused_with_413(stub_backend, stub):
    before = stub.requests
    with running(config_for(stub_backend)) as upstream, nginx(upstream, client_max_body_size="1k") as url:
        req = urllib.request.Request(url + "/v1/systemone", data=b"{" + b" " * 4000 + b"}", method="POST",
                                     headers={"authorization": f"Bearer {KEY}", "content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 413 and stub.requests == before


def test_at_the_examples_own_header_timeout_a_trickled_head_is_closed_within_it(stub_backend):
    """No directive replaced: the shipped ``client_header_timeout 10s`` holds."""
    documented = 10.0
    with running(config_for(stub_backend)) as upstream, nginx(upstream) as url:
        took, _ = trickle(connect(url), (request_head(10) * 20)[: int((documented + 5) / TRICKLE_S)])
    assert documented - 0.1 <= took < documented + SLACK_S, took
