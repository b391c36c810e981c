"""A compressed body is bounded in CPU as well as bytes, and decoded off the event loop.

Three bodies under 1 MB that cost seconds of event-loop CPU before: 49,499 empty gzip members,
110,000 empty zstd frames, 8,000 stacked gzip codings. Each is refused (400 ``invalid_encoding``, past
``MAX_MEMBERS`` or ``MAX_CODINGS``) at a cost to the event loop of at most 50 ms, and a ``/healthz``
probe while four of them are sent again and again never waits 100 ms. A compressed body is decoded
only once the in-flight and per-key limits admit it (429 before, nothing decoded).
"""

from __future__ import annotations

import asyncio
import gzip
import http.client
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import zstandard

from jev_shared.gateway import encoding
from jev_shared.gateway.app import create_app
from tests.gateway.conftest import KEY, client, config_for, lifespan, running
from tests.gateway.stub import FaultStub

LOOP_BUDGET_S, PROBE_BUDGET_S = 0.050, 0.100
ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(120)


def _bodies() -> dict[str, tuple[str, bytes]]:
    """name -> (Content-Encoding, body): three bodies cheap in bytes and dear in CPU, each under 1 MB."""
    gz = gzip.compress(b"", mtime=0)
    zs = zstandard.ZstdCompressor().compress(b"")
    return {"gzip members": ("gzip", gz * 49_499), "zstd frames": ("zstd", zs * 110_000),
            # the header is what stacks: 8,000 codings over a body of one (building 8,000 real layers takes a minute)
            "stacked codings": (", ".join(["gzip"] * 8_000), gzip.compress(b'{"model": "m"}'))}


BODIES = _bodies()


def _headers(coding: str) -> dict[str, str]:
    return {"content-encoding": coding, "content-type": "application/json", "authorization": f"Bearer {KEY}"}


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture(scope="module")
def stub():
    """The stub backend (this suite runs alone: its own): it must never be called here."""
    with FaultStub() as backend:
        yield backend


async def _worst_lag(work: object) -> tuple[float, object]:
    """Run ``work`` (a coroutine) beside a 1 ms ticker; (the ticker's worst lateness in seconds, its result)."""
    worst, done, ticking = [0.0], asyncio.Event(), asyncio.Event()

    async def tick() -> None:
        ticking.set()
        while not done.is_set():
            before = time.perf_counter()
            await asyncio.sleep(0.001)
            worst[0] = max(worst[0], time.perf_counter() - before - 0.001)

    ticker = asyncio.create_task(tick())
    await ticking.wait()
    try:
        result = await work  # type: ignore[misc]
    finally:
        done.set()
        await ticker
    return worst[0], result


async def _post(app: object, body: bytes, coding: str) -> tuple[int, dict]:
    """``POST /v1/systemone`` straight into the ASGI app (no HTTP client on the loop to muddy the
    measure): the body in one message, as uvicorn hands over a body that arrived whole."""
    headers = [(k.encode(), v.encode()) for k, v in {**_headers(coding), "host": "localhost",
                                                    "content-length": str(len(body))}.items()]
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/systemone", "raw_path": b"/v1/systemone", "query_string": b"", "root_path": "",
             "headers": headers, "client": ("127.0.0.1", 50000), "server": ("127.0.0.1", 8000), "state": {}}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    await app(scope, receive, send)  # type: ignore[operator]
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(payload)


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(BODIES))
async def test_a_hostile_body_costs_the_loop_at_most_50_ms(stub, name):
    coding, body = BODIES[name]
    assert len(body) < 1_000_000
    app = create_app(config_for(stub, max_body_bytes=1_000_000))
    async with lifespan(app):
        lag, (status, reply) = await _worst_lag(_post(app, body, coding))
    assert lag <= LOOP_BUDGET_S, f"{name}: the event loop was held {lag * 1000:.0f} ms"
    err = reply["error"]
    assert status == 400 and err["type"] == "invalid_encoding", reply
    assert str(encoding.MAX_CODINGS if name == "stacked codings" else encoding.MAX_MEMBERS) in err["message"]
    assert stub.requests == 0


def test_members_and_frames_up_to_the_cap_still_decode():
    for coding, one in (("gzip", gzip.compress(b"ab", mtime=0)), ("zstd", zstandard.ZstdCompressor().compress(b"ab"))):
        assert encoding.decode(one * encoding.MAX_MEMBERS, coding, 1000) == b"ab" * encoding.MAX_MEMBERS
        assert encoding.decode(gzip.compress(one), f"{coding}, gzip", 1000) == b"ab"


def attack(url: str, seconds: float, key: str) -> None:
    """Four connections sending the hostile bodies again and again for ``seconds`` (run in a process of its
    own, so the probe's timing is the gateway's, not this test's threads'); prints the statuses seen."""
    host, port = url.removeprefix("http://").split(":")
    stop, statuses = time.monotonic() + seconds, []

    def one(coding: str, body: bytes) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        while time.monotonic() < stop:
            conn.request("POST", "/v1/systemone", body=body,
                         headers={**_headers(coding), "authorization": f"Bearer {key}"})
            resp = conn.getresponse()
            resp.read()
            statuses.append(resp.status)
            if resp.getheader("connection") == "close":
                conn.close()
                conn = http.client.HTTPConnection(host, int(port), timeout=30)
        conn.close()

    threads = [threading.Thread(target=one, args=BODIES[name]) for name in (*sorted(BODIES), "gzip members")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(statuses))


@pytest.mark.slow
def test_healthz_answers_within_100_ms_while_hostile_bodies_arrive(stub):
    with running(config_for(stub, max_body_bytes=1_000_000)) as url:
        host, port = url.removeprefix("http://").split(":")
        code = f"from tests.hostile.test_gateway_decoding import attack; attack({url!r}, 4.0, {KEY!r})"
        attacker = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        probe, waits = http.client.HTTPConnection(host, int(port), timeout=10), []
        try:
            time.sleep(1.0)  # the attacker's imports and first bodies
            deadline = time.monotonic() + 2.5
            while time.monotonic() < deadline:
                started = time.perf_counter()
                probe.request("GET", "/healthz")
                resp = probe.getresponse()
                resp.read()
                waits.append(time.perf_counter() - started)
                assert resp.status == 200
                time.sleep(0.02)
            statuses = json.loads(attacker.communicate(timeout=60)[0])
        finally:
            attacker.kill()
            probe.close()
    assert max(waits) <= PROBE_BUDGET_S, f"/healthz waited {max(waits) * 1000:.0f} ms (p50 " \
                                         f"{sorted(waits)[len(waits) // 2] * 1000:.1f} ms, {len(waits)} probes)"
    assert len(statuses) >= 8 and set(statuses) == {400}, set(statuses)


@pytest.mark.anyio
@pytest.mark.parametrize("full", ["overloaded", "key_overloaded"])
async def test_the_limits_apply_before_decoding(stub, monkeypatch, full):
    def never(*a: object) -> bytes:
        raise AssertionError("decoded a body the limits refuse")

    monkeypatch.setattr(encoding, "decode", never)
    app = create_app(config_for(stub, max_in_flight=4, max_calls_per_key=4))
    gw = app.gateway
    async with client(app) as http:
        if full == "overloaded":
            gw.in_flight = 4
        else:
            gw.key_calls[KEY] = 4
        resp = await http.post("/v1/systemone", content=gzip.compress(b"{}"), headers=_headers("gzip"))
    assert resp.status_code == 429 and resp.json()["error"]["type"] == full and resp.headers["retry-after"]
    assert stub.requests == 0
