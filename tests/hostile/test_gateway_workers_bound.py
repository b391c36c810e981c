"""``jev serve --workers N``: N is bounded by what the machine carries (its cores, its available memory), said
in one line at the door with nothing started; and a stop signal during boot stops it promptly, spawning no
worker after it (gunicorn's own loop had forked every worker asked for before reading a signal: 100,000 asked
forked until the load average reached 135-180 on 2 cores, and SIGTERM waited 412 s)."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import jev_shared.cli.backends as cli_backends
import jev_shared.cli.serve as cli_serve
from jev_shared.cli import main
from jev_shared.gateway.workers import TooManyWorkersError, arbiter_class, check_workers, max_workers
from jev_shared.local import free_port

pytestmark = pytest.mark.timeout(120)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def nothing_starts(monkeypatch):
    def started(*a, **k):
        raise AssertionError("started something for a --workers this machine cannot carry")

    monkeypatch.setattr(cli_serve, "backends", started)
    monkeypatch.setattr(cli_backends, "sync_client", started)


@pytest.mark.parametrize("extra", [1, 100_000])
def test_more_workers_than_the_machine_carries_is_one_line_and_exit_2(extra, nothing_starts, capsys):
    most, _ = max_workers()
    status = main(["serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", "m", "--workers", str(most + extra)])
    err = capsys.readouterr().err.strip()
    assert status == 2 and len(err.splitlines()) == 1, err
    assert f"at most {most} workers" in err and "cores" in err, err
    assert "GiB available" in err or not Path("/proc/meminfo").exists(), err  # the memory, where the system says


def test_the_bound_is_the_cores_and_the_memory():
    most, why = max_workers()
    cores = len(os.sched_getaffinity(0))
    assert 1 <= most <= 2 * cores, why
    check_workers(most)
    with pytest.raises(TooManyWorkersError, match=f"at most {most} workers"):
        check_workers(most + 1)


def test_the_arbiter_spawns_no_worker_after_a_stop_signal():
    """gunicorn's Arbiter, its spawn loop as it runs, with the fork replaced: a TERM after the second worker."""
    class Asked(arbiter_class()):  # type: ignore[misc]
        num_workers = 1000  # in place of gunicorn's property, which its configuration sets

    arbiter = object.__new__(Asked)
    arbiter.WORKERS, arbiter.SIG_QUEUE = {}, queue.SimpleQueue()
    spawned: list[int] = []

    def spawn_worker() -> None:
        spawned.append(len(spawned))
        if len(spawned) == 2:
            arbiter.signal(signal.SIGTERM, None)  # the handler gunicorn installs for TERM

    arbiter.spawn_worker = spawn_worker
    arbiter.spawn_workers()
    assert spawned == [0, 1] and arbiter.SIG_QUEUE.get_nowait() == signal.SIGTERM


def test_sigterm_while_the_workers_boot_stops_promptly():
    most, _ = max_workers()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "jev_shared.cli", "serve", "--port", str(port), "--workers", str(max(2, most)),
         "--backend-url", "http://127.0.0.1:9/v1", "--model", "m", "--no-cache", "--log-level", "info"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT, start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    lines: queue.SimpleQueue[str] = queue.SimpleQueue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()
    try:
        while "Booting worker" not in lines.get(timeout=60):
            pass
        proc.send_signal(signal.SIGTERM)
        sent = time.perf_counter()
        proc.wait(timeout=30)
        took = time.perf_counter() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert took < 5.0, took
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):  # no worker left behind in its process group
        os.killpg(proc.pid, 0)
