"""Issue 36 R3: one client re-opening partial-header connections cannot take every connection slot.

The attacker connects from 127.0.0.2 (all of 127/8 is loopback on Linux), the legitimate client from
127.0.0.1. Before, 19 of 21 legitimate requests got 503 ``too_many_connections``; with a cap per client
address (``max_connections_per_client``) the attacker holds at most its share and every legitimate
request is answered.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request

import pytest

from tests.gateway.conftest import KEY, config_for, running
from tests.gateway.stub import FaultStub

pytestmark = pytest.mark.timeout(90)
TOTAL, PER_CLIENT = 24, 8


@pytest.fixture(scope="module")
def stub():
    with FaultStub() as backend:
        yield backend


def _address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").split(":")
    return host, int(port)


def _first_bytes(sock: socket.socket) -> bytes:
    try:
        return sock.recv(4096)
    except OSError:
        return b""


def test_one_client_cannot_take_every_connection(stub):
    config = config_for(stub, max_connections=TOTAL, max_connections_per_client=PER_CLIENT, header_timeout_s=1.0)
    with running(config) as url:
        stop, refused, held = threading.Event(), [], []

        def attack() -> None:
            """Keep 3x the total limit of partial-header connections open, re-opening each as it closes."""
            socks: list[socket.socket] = []
            while not stop.is_set():
                while len(socks) < 3 * TOTAL and not stop.is_set():
                    s = socket.create_connection(_address(url), timeout=5, source_address=("127.0.0.2", 0))
                    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n")  # never finished
                    s.settimeout(0.01)
                    socks.append(s)
                for s in list(socks):
                    got = _first_bytes(s) if s.fileno() >= 0 else b""
                    if got or s.fileno() < 0:
                        if b"503" in got.split(b"\r\n", 1)[0]:
                            refused.append(json.loads(got.partition(b"\r\n\r\n")[2])["error"])
                        s.close()
                        socks.remove(s)
                held.append(len(socks))
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
    assert refused and refused[0]["type"] == "too_many_connections"
    assert "--max-connections-per-client" in refused[0]["message"]
