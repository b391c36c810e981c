"""A local OpenAI-compatible stub with a fixed latency: isolates client-side cost from the model's.

It answers every /v1/chat/completions with a one-token reply and a 20-entry logprob window after
sleeping ``latency_s``, in a thread per request, so concurrency is real. It is the tests' loopback
server (:mod:`tests.helpers.server`) with one fixed body and no request log.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.helpers.replies import chat, window  # noqa: E402
from tests.helpers.server import Loopback  # noqa: E402
from tests.helpers.wire import Reply, json_reply  # noqa: E402

WINDOW = [(t, -0.1 * i) for i, t in enumerate(["A", "B", "C", "D", " A", "The", "a", "b", "E", "F",
                                                "G", "H", "I", "J", "K", "L", "M", "N", "O", "P"])]


def reply_body(finish_reason: str = "length") -> bytes:
    """The one-token reply ``A``: cut at the cap ("length") or finished by the model ("stop")."""
    return json_reply(chat("A", {"content": window(WINDOW, ("A", 0.0))}, finish_reason, usage=(100, 1))).body


BODY = reply_body()


class StubServer:
    """``with StubServer(latency_s=0.02) as base_url: ...``"""

    def __init__(self, latency_s: float = 0.02, body: bytes = BODY) -> None:
        reply = Reply(200, body)
        self.server = Loopback(lambda _req: reply, latency_s=latency_s, record=False)

    def __enter__(self) -> str:
        return self.server.start().base_url

    def __exit__(self, *exc: object) -> None:
        self.server.stop()
