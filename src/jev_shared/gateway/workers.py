"""``jev serve --workers N``: N gateway processes on one listening socket (a pre-fork, POSIX only).

The parent binds the socket (so a port in use fails at once, in the parent), then forks N workers;
each builds its own app (``create_app(config)``: its engine clients, memory, metrics and limits) and
runs uvicorn on the inherited socket, and the kernel hands each new connection to one of them. The
parent only supervises: a worker that dies is replaced, and SIGINT / SIGTERM is passed on to every
worker, which finishes what it answers (uvicorn's graceful shutdown) before the parent exits.

Forking after the configuration is read means every worker serves the same keys, limits and
backends (the embedded model, when there is one, runs once, in the parent). See docs/gateway.md,
"Workers", for what is per worker.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

#: A worker that dies sooner than this after its start is not restarted (a crash at start-up would loop).
MIN_LIFETIME_S = 5.0


def bind(host: str, port: int) -> socket.socket:
    """The listening socket every worker accepts on."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _spawn(serve: Callable[[socket.socket], Any], sock: socket.socket) -> int:
    pid = os.fork()
    if pid == 0:  # the worker: default signals (uvicorn installs its own), serve, never return
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        _die_with_parent()
        code = 0
        try:
            serve(sock)
        except BaseException:  # noqa: BLE001 - a worker's failure is its exit status, the parent reports it
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return pid


def _die_with_parent() -> None:
    """Linux: SIGTERM this worker when the parent dies, even by SIGKILL (no orphan keeps the port)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def run_workers(n: int, sock: socket.socket, serve: Callable[[socket.socket], Any]) -> int:
    """Fork ``n`` workers that each ``serve(sock)``; supervise until a signal (or every worker gave up)."""
    if not hasattr(os, "fork"):
        raise SystemExit("jev serve: --workers needs a POSIX system (fork); run one process per port instead")
    stopping: list[int] = []
    started: dict[int, float] = {}

    def stop(signum: int, _: Any) -> None:  # waitpid resumes after a handler (PEP 475): the workers' exits end it
        stopping.append(signum)
        for pid in started:
            _signal(pid, signal.SIGTERM)

    old = {s: signal.signal(s, stop) for s in (signal.SIGINT, signal.SIGTERM)}
    for _ in range(n):
        started[_spawn(serve, sock)] = time.monotonic()
    print(f"jev serve: {n} workers (pids {sorted(started)})", file=sys.stderr)
    try:
        while started and not stopping:
            try:
                pid, status = os.waitpid(-1, 0)
            except InterruptedError:
                continue
            except ChildProcessError:
                break
            born = started.pop(pid, None)
            if born is None or stopping:
                continue
            print(f"jev serve: worker {pid} exited ({_status(status)})", file=sys.stderr)
            if time.monotonic() - born >= MIN_LIFETIME_S:
                started[_spawn(serve, sock)] = time.monotonic()
    finally:
        for pid in list(started):
            _signal(pid, signal.SIGTERM)
        for pid in list(started):
            _reap(pid)
        for s, handler in old.items():
            signal.signal(s, handler)
        sock.close()
    return 0 if stopping else 1


def _status(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"status {os.WEXITSTATUS(status)}"


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


def _reap(pid: int, timeout_s: float = 30.0) -> None:
    """Wait for a worker's graceful exit; past ``timeout_s``, kill it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        if done:
            return
        time.sleep(0.05)
    _signal(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
