"""One provider double for the whole suite: reply builders, the real SDKs over MockTransport, a loopback server.

- :mod:`.replies`: provider-shaped bodies per surface (windows, JSON answers, documented errors) and
  handler factories (``windows``, ``in_turn``, ``fails``).
- :mod:`.provider`: ``provider(handler)`` / ``aprovider(handler)`` / ``anthropic_provider(handler)``, the
  real ``openai`` and ``anthropic`` clients with every request recorded on ``client.wire``.
- :mod:`.server`: :class:`Loopback`, the same handlers over real sockets (the fault matrix, the gateway's
  backend, the benches).
"""

from .provider import Wire, anthropic_provider, aprovider, provider
from .replies import fails, in_turn, windows
from .wire import Hang, Reply, Request, Reset, json_reply

__all__ = ["Hang", "Reply", "Request", "Reset", "Wire", "anthropic_provider", "aprovider", "fails", "in_turn",
           "json_reply", "provider", "windows"]
