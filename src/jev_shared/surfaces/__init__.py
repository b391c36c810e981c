"""The wires the engine speaks, one module each, and the registry that lists them (:mod:`.registry`).

A wire is one :class:`~jev_shared.surfaces.wire.Surface`: its client method, HTTP route, request builder and reply
parser, and the facts the flows ask of it. Adding one is a module here and a line in ``registry._WIRES``.
"""

from .registry import APIS, AUTO_ORDER, HOSTED, ROUTES, SURFACES, build_call, fallback_of, parse_reply, speaks
from .wire import Parsed, Surface

__all__ = ["APIS", "AUTO_ORDER", "HOSTED", "ROUTES", "SURFACES", "Parsed", "Surface", "build_call", "fallback_of",
           "parse_reply", "speaks"]
