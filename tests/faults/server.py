"""The fault matrix's server: the shared loopback server with a script of faults for marked requests.

It answers ``/v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` the way a provider
would, so the real openai and anthropic SDKs (and the engine's transport) see real HTTP. A test
arms a script of faults; each request whose body carries the marker gets the next one, every
other request a good reply read off the request itself (the labels the prompt asks for, or the
JSON schema it sends). Every request is recorded, so tests assert what went over the wire.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tests.helpers.server import Loopback
from tests.helpers.wire import MARKER, Action, Hang, Reply, Request, Reset, json_reply

Fault = Callable[[Request], Action]

__all__ = ["MARKER", "Action", "Fault", "FaultServer", "Hang", "Reply", "Request", "Reset", "json_reply"]


class FaultServer(Loopback):
    """``with FaultServer(good) as srv: srv.arm([fault, ...]); ... srv.marked()``."""

    def __init__(self, good: Fault) -> None:
        super().__init__(good)
        self.good = good
        self._script: list[Fault] = []
        self._forever: Fault | None = None

    @property
    def requests(self) -> list[Request]:
        return self.log

    def arm(self, faults: Sequence[Fault], *, forever: bool = False) -> None:
        """Marked requests get ``faults`` in turn; with ``forever`` the last one repeats, else good replies."""
        with self.lock:
            self._script = list(faults)
            self._forever = faults[-1] if forever and faults else None

    def handle(self, req: Request) -> Action:
        with self.lock:
            if not req.marked:
                fault = self.good
            elif self._script:
                fault = self._script.pop(0)
            else:
                fault = self._forever or self.good
        return fault(req)

    def marked(self) -> list[Request]:
        """The requests that carried the marker (the faulty question's), in order."""
        with self.lock:
            return [r for r in self.log if r.marked]
