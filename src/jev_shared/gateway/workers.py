"""``jev serve --workers N``: N gateway processes under gunicorn, each running uvicorn (``UvicornWorker``).

gunicorn's arbiter binds the socket, forks the workers, replaces one that dies, stops gracefully on
SIGTERM (SIGINT: its quick stop) and reloads the workers on SIGHUP (its own documented signals). Each worker builds its own app (``create_app(config)``: its engine
clients, memory, metrics and limits) after the fork. The model is not a worker's: a ``--backend-url``
server, or the embedded model that ``jev serve`` started once, before gunicorn, and every worker
points at (docs/gateway.md, "Workers and scaling out"). POSIX only, as gunicorn is.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from .config import GatewayConfig
from .protocol import uvicorn_settings


def worker_class(config: GatewayConfig, log_level: str) -> type[Any]:
    """``uvicorn_worker.UvicornWorker`` carrying the gateway's uvicorn settings (its documented ``CONFIG_KWARGS``)."""
    from uvicorn_worker import UvicornWorker

    settings = {k: v for k, v in uvicorn_settings(config).items() if k != "log_config"}
    return type("GatewayWorker", (UvicornWorker,), {
        "CONFIG_KWARGS": {**UvicornWorker.CONFIG_KWARGS, **settings, "log_level": log_level}})


def run_workers(config: GatewayConfig, host: str, port: int, workers: int, log_level: str = "warning") -> int:
    """Serve ``config`` on ``host:port`` with ``workers`` gunicorn workers until a signal; gunicorn's exit status."""
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
