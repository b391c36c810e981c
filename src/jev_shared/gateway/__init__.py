"""The System One gateway: ``POST /v1/systemone`` over the engine, as a real HTTP service.

An application on the engine's public API only (``from jev_shared import ...``, ``jev_shared.local``,
``jev_shared.redact``). ``create_app(GatewayConfig(...))`` (in :mod:`.app`, needs the ``serve``
extra) is the ASGI app; :mod:`.protocol` is uvicorn's protocol with the slow-client bounds; ``jev
serve`` (:mod:`jev_shared.cli.serve`) runs it. See docs/gateway.md.
"""

from .config import Backend, GatewayConfig, is_loopback, load_keys

__all__ = ["Backend", "GatewayConfig", "is_loopback", "load_keys"]
