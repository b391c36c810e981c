"""One client re-opening slow connections cannot take every slot -- through the reverse proxy.

The per-client cap lives in nginx (examples/deploy/nginx.conf: ``limit_conn`` per address,
``client_header_timeout``), not in uvicorn, which has none. The attacker connects from 127.0.0.2 (all
of 127/8 is loopback on Linux), the legitimate client from 127.0.0.1: the attacker's partial heads
never reach the gateway and are closed on time, its requests past the cap are answered 503 at once,
and every legitimate request is answered. Skipped, saying so, where nginx is not installed.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from tests.gateway.conftest import KEY, config_for, running
from tests.gateway.proxy import needs_nginx, nginx
from tests.gateway.stub import FaultStub

pytestmark = [needs_nginx, pytest.mark.timeout(90)]
TOTAL, PER_CLIENT = 24, 8


@pytest.fixture(scope="module")
def stub():
    with FaultStub() as backend:
        yield backend


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _open(url: str, head: bytes) -> socket.socket:
    s = socket.create_connection(_address(url), timeout=5, source_address=("127.0.0.2", 0))
    s.sendall(head)
    s.settimeout(0.01)
    return s


def test_one_client_cannot_take_every_connection(stub):
    partial = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"  # never finished
    held_body = (f"POST /v1/systemone HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {KEY}\r\n"
                 "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n").encode()  # body never sent
    with running(config_for(stub, max_connections=TOTAL)) as upstream, \
            nginx(upstream, client_header_timeout="1s", client_body_timeout="5s",
                  limit_conn=f"per_client {PER_CLIENT}") as url:
        stop, statuses_503 = threading.Event(), []

        def attack() -> None:
            """3x the gateway's connection limit of partial heads and of held bodies, re-opened as closed."""
            socks: list[socket.socket] = []
            while not stop.is_set():
                while len(socks) < 6 * TOTAL and not stop.is_set():
                    socks.append(_open(url, partial if len(socks) % 2 else held_body))
                for s in list(socks):
                    try:
                        got = s.recv(4096)
                    except TimeoutError:
                        continue
                    except OSError:
                        got = b""
                    if got.startswith(b"HTTP/1.1 503"):
                        statuses_503.append(got)
                    s.close()
                    socks.remove(s)
                time.sleep(0.02)
            for s in socks:
                s.close()

        attacker = threading.Thread(target=attack, daemon=True)
        attacker.start()
        try:
            time.sleep(0.5)  # the attacker has filled what it can
            statuses = []
            for _ in range(21):
                req = urllib.request.Request(f"{url}/v1/models", headers={"authorization": f"Bearer {KEY}"})
                try:
                    with urllib.request.urlopen(req, timeout=10) as resp:
                        statuses.append(resp.status)
                except urllib.error.HTTPError as exc:
                    statuses.append(exc.code)
                time.sleep(0.05)
        finally:
            stop.set()
            attacker.join(timeout=30)
    assert statuses == [200] * 21, statuses
    assert statuses_503, "the attacker's requests past limit_conn were answered 503"
    assert stub.requests == 0
