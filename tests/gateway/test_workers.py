"""``jev serve --workers 2``: 64 concurrent clients, no error and no mixed-up answer, both workers alive.

The gateway runs as a real ``jev serve`` subprocess (two forked workers on one socket) over the stub
backend, which answers from the prompt: each request's state names its own option (``want=k<n>``)
and a truth word, so an answer that reached the wrong caller would name another request's option.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jev_shared.local import free_port
from tests.gateway.conftest import KEY, MODEL
from tests.gateway.crowd import assert_each_got_its_own, crowd, wait_healthy

CLIENTS, PER_CLIENT = 64, 4
ROOT = Path(__file__).resolve().parents[2]


def start(stub_url: str, workers: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jev_shared.cli", "serve", "--port", str(port), "--workers", str(workers),
         "--backend-url", stub_url, "--model", MODEL, "--no-cache", "--max-retries", "0", "--log-level", "warning",
         # limits are per worker: 64 clients x 2 calls must fit in one worker, however the kernel spreads them
         "--max-calls-per-key", "256", "--max-in-flight", "256"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "JEV_API_KEYS": KEY, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    wait_healthy(proc, url, 60)
    return proc, url


def stop(proc: subprocess.Popen) -> str:
    proc.terminate()
    try:
        return proc.communicate(timeout=30)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1]


@pytest.mark.timeout(240)
def test_two_workers_answer_64_clients_each_their_own(stub):
    proc, url = start(stub.base_url, 2)
    try:
        results = crowd(url, CLIENTS, PER_CLIENT, timeout=60)
        alive = proc.poll() is None
    finally:
        err = stop(proc)
    assert alive, err
    assert_each_got_its_own(results, stub, CLIENTS * PER_CLIENT)
    pids = [int(p) for p in re.findall(r"\d+", re.search(r"2 workers \(pids \[([\d, ]+)\]\)", err).group(1))]
    assert len(set(pids)) == 2
    assert proc.returncode == 0, err


def test_workers_must_be_positive(tmp_path):
    done = subprocess.run([sys.executable, "-m", "jev_shared.cli", "serve", "--workers", "0", "--backend-url",
                           "http://127.0.0.1:9/v1", "--model", "m"], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert done.returncode == 2
    assert "argument --workers: '0' is not an integer of at least 1" in done.stderr
