"""Run the gateway under uvicorn in a background thread: for tests, benches, and embedding it.

    with BackgroundServer(create_app(config)) as base_url:   # "http://127.0.0.1:PORT"
        ...
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from .config import GatewayConfig


class BackgroundServer:
    """uvicorn on a loopback socket bound up front (so the port is known before it starts)."""

    def __init__(self, app: Any, host: str = "127.0.0.1", log_level: str = "warning",
                 config: GatewayConfig | None = None) -> None:
        import uvicorn

        from .protocol import uvicorn_config

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.base_url = f"http://{host}:{self.sock.getsockname()[1]}"
        #: The gateway's slow-client bounds (its protocol) come from ``config``; without one, the defaults.
        self.server = uvicorn.Server(uvicorn_config(
            app, config or getattr(app, "gateway_config", None) or GatewayConfig(backends={}), log_level=log_level))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the gateway did not start")
            time.sleep(0.01)
        return self.base_url

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()
