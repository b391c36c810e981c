"""The routes' dependencies: the app's :class:`Gateway`, and the caller behind a declared bearer scheme.

The ``Auth`` middleware checks the key before the body is read (a refused caller costs nothing);
``caller`` is where a route says it needs one, so ``/openapi.json`` declares the scheme, and it
hands the route the key the middleware accepted (the per-key limits count by it).
"""

from __future__ import annotations

from fastapi import Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from .service import Gateway

bearer = HTTPBearer(auto_error=False, scheme_name="bearer",
                    description="a key from JEV_API_KEYS or --api-key-file; none when the gateway serves loopback only")


async def gateway(request: Request) -> Gateway:
    """The Gateway this app was built with (``app.state.gateway``)."""
    return request.app.state.gateway


async def caller(request: Request, _: HTTPAuthorizationCredentials | None = Security(bearer)) -> str | None:  # noqa: B008
    """The bearer key the Auth middleware accepted, or None when the gateway runs without keys (then any
    bearer a caller sends is ignored: every caller shares one budget, whatever it presents)."""
    if not request.app.state.gateway.config.auth_required:
        return None
    return request.scope.get("jev", {}).get("key")
