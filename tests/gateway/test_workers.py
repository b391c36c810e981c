"""``jev serve --workers N`` on gunicorn's ``UvicornWorker``: many clients, each its own answer; a killed
worker replaced; and scale-out, N workers on one model server and, behind nginx, on two.

The gateway runs as a real ``jev serve`` subprocess over stub backends, which answer from the prompt:
each request's state names its own option (``want=k<n>``) and a truth word, so an answer that
reached the wrong caller would name another request's option.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from jev_shared.local import free_port
from tests.gateway.conftest import KEY, MODEL
from tests.gateway.crowd import assert_each_got_its_own, crowd, wait_healthy
from tests.gateway.proxy import needs_nginx, nginx
from tests.gateway.stub import FaultStub

CLIENTS, PER_CLIENT = 64, 4
ROOT = Path(__file__).resolve().parents[2]


def start(stub_url: str, workers: int, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jev_shared.cli", "serve", "--port", str(port), "--workers", str(workers),
         "--backend-url", stub_url, "--model", MODEL, "--no-cache", "--max-retries", "0", "--log-level", "warning",
         # limits are per worker: 64 clients x 2 calls must fit in one worker, however the kernel spreads them
         "--max-calls-per-key", "256", "--max-in-flight", "256", *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "JEV_API_KEYS": KEY, "PYTHONPATH": str(ROOT / "src")})
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 60)
    return proc, url


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        return proc.communicate(timeout=40)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1]


def workers_of(pid: int, n: int, timeout_s: float = 30) -> list[int]:
    """The ``n`` worker pids gunicorn's arbiter (``pid``) has running, once it has them all."""
    deadline = time.monotonic() + timeout_s
    while True:
        kids = [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        if len(kids) == n or time.monotonic() > deadline:
            return kids
        time.sleep(0.1)


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_workers_answer_64_clients_each_their_own(stub):
    proc, url = start(stub.base_url, 2)
    try:
        pids = workers_of(proc.pid, 2)
        results = crowd(url, CLIENTS, PER_CLIENT, timeout=60)
        alive = proc.poll() is None
    finally:
        err = stop(proc)
    assert alive, err
    assert_each_got_its_own(results, stub, CLIENTS * PER_CLIENT)
    assert len(set(pids)) == 2
    assert proc.returncode == 0, err


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_two_workers_keep_every_state_on_whole_lines_of_one_file(stub, tmp_path):
    kept = tmp_path / "states.jsonl"
    proc, url = start(stub.base_url, 2, "--keep-states", str(kept))
    try:
        workers_of(proc.pid, 2)
        results = crowd(url, CLIENTS, PER_CLIENT, timeout=60)
    finally:
        err = stop(proc)
    assert_each_got_its_own(results, stub, CLIENTS * PER_CLIENT)
    lines = [json.loads(line) for line in kept.read_text().splitlines()]  # every line whole JSON
    want = sorted((f"request {n} want=k{n} truth={'yes' if n % 2 else 'no'}", q)
                  for n in range(CLIENTS * PER_CLIENT) for q in ("route", "flag"))
    assert sorted((line["state"], line["question_id"]) for line in lines) == want, err


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_a_killed_worker_is_replaced_and_the_service_stays_up(stub):
    proc, url = start(stub.base_url, 2)
    try:
        first = workers_of(proc.pid, 2)
        os.kill(first[0], signal.SIGKILL)
        statuses = [httpx.get(url + "/healthz", timeout=10).status_code for _ in range(20)]  # meanwhile
        now = workers_of(proc.pid, 2)
        deadline = time.monotonic() + 30
        while first[0] in now or len(now) < 2:
            assert time.monotonic() < deadline, now
            time.sleep(0.1)
            now = workers_of(proc.pid, 2)
        wait_healthy(proc, url, 30)
        results = crowd(url, 8, 4, timeout=60)
        alive = proc.poll() is None
    finally:
        err = stop(proc)
    assert alive, err
    assert statuses == [200] * 20
    assert first[1] in now and first[0] not in now  # the survivor kept, the dead one replaced
    assert_each_got_its_own(results, stub, 8 * 4)


@needs_nginx
@pytest.mark.timeout(240)
def test_workers_on_two_model_servers_behind_nginx_each_answer_their_own():
    """Scale-out: a ``jev serve --workers 2`` per model server, nginx balancing the two."""
    with FaultStub() as one, FaultStub() as two:
        (p1, u1), (p2, u2) = start(one.base_url, 2), start(two.base_url, 2)
        try:
            with nginx(u1, u2, limit_conn="per_client 256") as url:
                results = crowd(url, 32, 4, timeout=60)
        finally:
            stop(p1)
            stop(p2)
        assert [(s, b) for _, s, b in results if s != 200] == []
        assert all(b["answers"]["route"]["choice"] == f"k{n}" for n, _, b in results)
        assert one.requests > 0 and two.requests > 0  # both model servers answered
        assert one.requests + two.requests == 2 * 32 * 4


@pytest.mark.slow
@pytest.mark.live
@pytest.mark.timeout(240)
def test_two_workers_on_the_embedded_model_started_once_survive_their_workers_exits():
    """No ``--backend-url``: ``jev serve`` starts the embedded model once, then gunicorn forks the workers,
    which point at it. A worker killed, and one stopped gracefully (its exit never unwinds the launcher's
    stack, whose exit stops the model), are replaced and the model still answers through the port."""
    pytest.importorskip("xllamacpp")
    from jev_shared.local import WIRE_MODEL

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jev_shared.cli", "serve", "--port", str(port), "--workers", "2", "--model", WIRE_MODEL,
         "--no-cache", "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, env={**os.environ, "JEV_API_KEYS": KEY, "PYTHONPATH": str(ROOT / "src")})
    url = f"http://127.0.0.1:{port}"
    body = {"model": WIRE_MODEL, "state": "My invoice was charged twice.", "questions": {
        "team": {"type": "choice", "instructions": "Which team?", "criteria": {"billing": "money", "tech": "bugs"}}}}
    answered = []
    try:
        wait_healthy(proc, url, 120)
        for signum in (signal.SIGKILL, signal.SIGTERM):
            before = workers_of(proc.pid, 2)
            os.kill(before[0], signum)
            deadline = time.monotonic() + 60
            while before[0] in (now := workers_of(proc.pid, 2)) or len(now) < 2:
                assert time.monotonic() < deadline, now
                time.sleep(0.2)
            for _ in range(4):  # whichever worker gets each: the model answers
                resp = httpx.post(url + "/v1/systemone", json=body, timeout=60,
                                  headers={"authorization": f"Bearer {KEY}"})
                answered.append((resp.status_code, sorted(resp.json().get("answers", {}))))
    finally:
        err = stop(proc)
    assert answered == [(200, ["team"])] * 8, err[-2000:]
    assert err.count("jev: embedded model") == 1  # started once, by the launcher
    assert proc.returncode == 0, err[-2000:]


@pytest.mark.slow
def test_workers_must_be_positive(tmp_path):
    done = subprocess.run([sys.executable, "-m", "jev_shared.cli", "serve", "--workers", "0", "--backend-url",
                           "http://127.0.0.1:9/v1", "--model", "m"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=60)
    assert done.returncode == 2
    assert "argument --workers: '0' is not an integer of at least 1" in done.stderr
