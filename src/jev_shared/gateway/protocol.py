"""uvicorn's settings for the gateway: every bound through a setting uvicorn documents, nothing subclassed.

- ``max_connections`` -> ``limit_concurrency``: past it uvicorn answers 503 (its own plain-text body)
  and closes;
- ``keep_alive_s`` -> ``timeout_keep_alive``: an idle kept-alive connection is closed;
- a request's body within ``body_timeout_s`` of its head: the ASGI layer reading it
  (``middleware.BodyLimit``, 408 ``request_timeout``).

What uvicorn does not bound -- how long a client may take to send its headers, and how many
connections one client address may hold -- is a reverse proxy's job: ``examples/deploy/nginx.conf``
(``client_header_timeout``, ``client_body_timeout``, ``limit_conn`` per address,
``client_max_body_size``), tested in front of ``jev serve`` by tests/gateway/test_proxy.py.
"""

from __future__ import annotations

from typing import Any

from .config import GatewayConfig


def uvicorn_settings(config: GatewayConfig) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords that carry ``config``'s bounds (shared with the gunicorn workers)."""
    return {"timeout_keep_alive": config.keep_alive_s, "limit_concurrency": config.max_connections,
            "ws": "none", "access_log": False, "log_config": None}


def uvicorn_config(app: Any, config: GatewayConfig, **kw: Any) -> Any:
    """A ``uvicorn.Config`` for the gateway: its bounds, no access log of uvicorn's own (the gateway logs)."""
    import uvicorn

    kw.setdefault("log_level", "warning")
    return uvicorn.Config(app, **{**uvicorn_settings(config), **kw})
