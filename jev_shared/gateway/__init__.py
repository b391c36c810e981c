"""The System One gateway: ``POST /v1/systemone`` over the engine, as a real HTTP service.

Built only on the engine's public API (``from jev_shared import ...`` and ``jev_shared.local``).
``create_app(GatewayConfig(...))`` (in :mod:`.app`, needs the ``serve`` extra) is the ASGI app;
``jev serve`` runs it under uvicorn. See docs/gateway.md.
"""

from .config import Backend, GatewayConfig, is_loopback, load_keys

__all__ = ["Backend", "GatewayConfig", "is_loopback", "load_keys"]
