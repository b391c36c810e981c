"""``jev serve --workers N``: N gateway processes under gunicorn, each running uvicorn (``UvicornWorker``).

gunicorn's arbiter binds the socket, forks the workers, replaces one that dies, stops gracefully on
SIGTERM (SIGINT: its quick stop) and reloads the workers on SIGHUP (its own documented signals). Each worker builds its own app (``create_app(config)``: its engine
clients, memory, metrics and limits) after the fork. The model is not a worker's: a ``--backend-url``
server, or the embedded model that ``jev serve`` started once, before gunicorn, and every worker
points at (docs/gateway.md, "Workers and scaling out"). POSIX only, as gunicorn is.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from typing import Any

from .config import GatewayConfig
from .protocol import uvicorn_settings


def worker_class(config: GatewayConfig, log_level: str) -> type[Any]:
    """``uvicorn_worker.UvicornWorker`` carrying the gateway's uvicorn settings (its documented ``CONFIG_KWARGS``)."""
    from uvicorn_worker import UvicornWorker

    settings = {k: v for k, v in uvicorn_settings(config).items() if k != "log_config"}
    return type("GatewayWorker", (UvicornWorker,), {
        "CONFIG_KWARGS": {**UvicornWorker.CONFIG_KWARGS, **settings, "log_level": log_level}})


#: Workers a core carries: each is one event loop (one core's worth at most), and one more per core keeps the
#: cores busy while a worker waits on its GIL or a blocking step.
WORKERS_PER_CORE = 2
#: Memory one worker takes, with room to serve: 75 MiB measured at start (the app built, nothing served), its
#: clients' connection pools and the engine's memory besides.
WORKER_BYTES = 128 * 1024 * 1024


class TooManyWorkersError(ValueError):
    """``--workers N`` past what this machine's cores or memory carry (:func:`max_workers`)."""


def max_workers() -> tuple[int, str]:
    """The most workers this machine carries, and why (its cores and available memory, in words)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    by_cores = WORKERS_PER_CORE * cores
    available = _available_bytes()
    if available is None:
        return by_cores, f"{cores} cores x {WORKERS_PER_CORE}"
    by_memory = max(1, available // WORKER_BYTES)
    why = (f"{cores} cores x {WORKERS_PER_CORE} = {by_cores}; {available / 2**30:.1f} GiB available / "
           f"{WORKER_BYTES // 2**20} MiB a worker = {by_memory}")
    return min(by_cores, by_memory), why


def check_workers(workers: int) -> None:
    """A :class:`TooManyWorkersError` when ``workers`` is past :func:`max_workers`."""
    most, why = max_workers()
    if workers > most:
        raise TooManyWorkersError(f"{workers}: this machine carries at most {most} workers ({why})")


def _available_bytes() -> int | None:
    """Memory available to new processes (Linux's MemAvailable, else the free pages), or None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def arbiter_class() -> type[Any]:
    """gunicorn's ``Arbiter`` that stops spawning once a stop signal came (TERM, INT, QUIT): its own loop spawns
    every worker asked for before it reads a signal, so a stop during boot waited for all of them to start."""
    from gunicorn.arbiter import Arbiter

    stops = {signal.SIGTERM, signal.SIGINT, signal.SIGQUIT}

    class GatewayArbiter(Arbiter):
        stopping = False

        def signal(self, sig: int, frame: Any) -> None:
            if sig in stops:
                self.stopping = True
            super().signal(sig, frame)

        def spawn_workers(self) -> None:  # gunicorn's loop, stopping at a stop signal: it is handled next
            for _ in range(self.num_workers - len(self.WORKERS)):
                if self.stopping:
                    return
                self.spawn_worker()
                time.sleep(0.1 * random.random())  # noqa: S311 - gunicorn's own stagger

    return GatewayArbiter


def run_workers(config: GatewayConfig, host: str, port: int, workers: int, log_level: str = "warning") -> int:
    """Serve ``config`` on ``host:port`` with ``workers`` gunicorn workers until a signal; gunicorn's exit status.
    More workers than the machine carries is a :class:`TooManyWorkersError`, before anything starts."""
    check_workers(workers)
    from gunicorn.app.base import BaseApplication

    from .app import create_app

    options = {"bind": f"[{host}]:{port}" if ":" in host else f"{host}:{port}", "workers": workers,
               "worker_class": worker_class(config, log_level), "keepalive": max(1, round(config.keep_alive_s)),
               "graceful_timeout": 30, "loglevel": log_level, "accesslog": None, "proc_name": "jev-serve"}

    class Gateway(BaseApplication):  # gunicorn's documented custom application
        def load_config(self) -> None:
            for key, value in options.items():
                self.cfg.set(key, value)

        def load(self) -> Any:
            return create_app(config)

        def run(self) -> None:  # BaseApplication.run, with the arbiter above
            try:
                arbiter_class()(self).run()
            except RuntimeError as exc:
                print(f"jev serve: {exc}", file=sys.stderr)
                sys.exit(1)

    launcher = os.getpid()
    try:
        Gateway().run()
    except SystemExit as exc:  # gunicorn's arbiter, and each worker it forked, end with sys.exit
        code = exc.code if isinstance(exc.code, int) else 1
        if os.getpid() != launcher:  # a worker ends here: it never unwinds the launcher's stack (whose
            sys.stdout.flush()       # exit would stop the embedded model every worker shares)
            sys.stderr.flush()
            os._exit(code)
        return code
    return 0
