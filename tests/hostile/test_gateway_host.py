"""A request with two Host headers is a 400 (RFC 9112 section 3.2), over real HTTP on loopback.

Before, only the first was read: ``localhost`` then ``attacker.example`` passed the no-keys Host check.
"""

from __future__ import annotations

import json
import socket

import pytest

from tests.gateway.conftest import KEY, config_for, running
from tests.gateway.stub import FaultStub

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def stub():
    with FaultStub() as backend:
        yield backend


def exchange(url: str, head: str) -> tuple[int, dict]:
    """Send ``head`` (a GET's request line and headers), read the whole answer: (status, JSON body)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head.encode() + b"connection: close\r\n\r\n")
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2] or b"{}")


@pytest.mark.parametrize("keys", [False, True], ids=["no keys", "keys"])
@pytest.mark.parametrize("hosts", [("localhost", "attacker.example"), ("localhost", "localhost")],
                         ids=["different", "same"])
def test_two_host_headers_are_a_400(stub, keys, hosts):
    config = config_for(stub, api_keys=frozenset({KEY}) if keys else frozenset())
    with running(config) as url:
        status, body = exchange(url, "GET /v1/models HTTP/1.1\r\n" + "".join(f"Host: {h}\r\n" for h in hosts)
                                + f"authorization: Bearer {KEY}\r\n")
        assert status == 400 and body["error"]["type"] == "bad_request", body
        assert "more than one Host header" in body["error"]["message"]
        ok, _ = exchange(url, f"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nauthorization: Bearer {KEY}\r\n")
        assert ok == 200
