"""Slow and greedy clients against the gateway under uvicorn, over raw loopback sockets.

A body trickled a byte at a time (the gateway's ``--body-timeout``, a 408 in its error shape), more
connections than ``--max-connections`` (uvicorn's ``limit_concurrency``: its 503), and a keep-alive
client left alone. A request head trickled or never sent is the reverse proxy's bound
(``client_header_timeout`` in examples/deploy/nginx.conf): tests/gateway/test_proxy.py runs those
through nginx. The bounds are set small here (1 s) so the tests are quick; the defaults are in
docs/gateway.md.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.gateway.conftest import KEY, MODEL, config_for, running

BODY_S = 1.0
#: What a closed connection may take past its bound: the event loop's timer and the socket's close.
SLACK_S = 0.75
TRICKLE_S = 0.2


@pytest.fixture(scope="module")
def slow_url(stub_backend):
    with running(config_for(stub_backend, body_timeout_s=BODY_S, max_connections=12)) as url:
        yield url


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.settimeout(0.05)
    return sock


def trickle(sock: socket.socket, data: bytes, every_s: float = TRICKLE_S) -> tuple[float, bytes]:
    """Send ``data`` a byte every ``every_s`` until the server closes; (seconds open, what it answered)."""
    started, got = time.monotonic(), b""
    for i in range(len(data)):
        try:
            sock.sendall(data[i:i + 1])
        except OSError:  # closed under us
            break
        deadline = time.monotonic() + every_s
        closed = False
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            got += chunk
        if closed:
            break
    took = time.monotonic() - started
    sock.close()
    return took, got


def error_of(raw: bytes) -> tuple[int, dict]:
    head, _, body = raw.partition(b"\r\n\r\n")
    return int(head.split(b" ")[1]), json.loads(body)["error"]


def request_head(length: int) -> bytes:
    return (f"POST /v1/systemone HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n").encode()


def test_a_trickled_body_is_cut_off_with_a_408(slow_url, stub):
    payload = json.dumps({"model": MODEL, "state": "x", "questions": {"s": {"type": "noul", "instructions": "y"}}})
    sock = connect(slow_url)
    sock.sendall(request_head(len(payload)))  # the head at once: the body timer starts here
    took, got = trickle(sock, payload.encode())
    status, err = error_of(got)
    assert status == 408 and err["type"] == "request_timeout" and "body" in err["message"]
    assert BODY_S - 0.1 <= took < BODY_S + SLACK_S, took
    assert stub.requests == 0


def test_connections_past_the_limit_get_a_503_at_once(stub_backend):
    """``--max-connections`` is uvicorn's ``limit_concurrency``: a request past it gets uvicorn's 503 at once."""
    with running(config_for(stub_backend, max_connections=3)) as url:
        held = [connect(url) for _ in range(3)]
        time.sleep(0.2)
        extra = connect(url)
        extra.settimeout(2)
        started = time.monotonic()
        extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        got = b""
        while chunk := extra.recv(65536):
            got += chunk
        assert got.startswith(b"HTTP/1.1 503") and time.monotonic() - started < 1.0, got[:100]
        for sock in held:
            sock.close()
        time.sleep(0.2)
        again = connect(url)  # a slot is free again: answered normally
        again.settimeout(5)
        again.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert again.recv(65536).startswith(b"HTTP/1.1 200")
        again.close()


def test_a_request_that_is_not_http_gets_a_400_and_is_closed(slow_url):
    sock = connect(slow_url)
    sock.settimeout(5)
    sock.sendall(b"NOT HTTP AT ALL\r\n\r\n")
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    sock.close()
    assert got.startswith(b"HTTP/1.1 400"), got[:100]


@pytest.mark.slow
def test_a_normal_keep_alive_client_is_not_cut_off(slow_url, stub):
    """Two requests on one connection, the second after a pause shorter than keep-alive: both answered."""
    sock = connect(slow_url)
    sock.settimeout(10)
    for _ in range(2):
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        time.sleep(BODY_S + 0.3)  # idle past the body bound: keep-alive's own timer governs idle time
    sock.close()
