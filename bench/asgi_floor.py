"""The floor under any gateway on these parts: uvicorn (the gateway's settings) serving a bare ASGI app.

``python bench/asgi_floor.py PORT BACKEND MODE`` serves ``POST /v1/systemone`` with a fixed 300-byte JSON
reply: MODE ``in`` answers at once (uvicorn, httptools and the event loop: what receiving and answering a
request costs), ``post`` first posts one Chat Completions body to ``BACKEND`` with the HTTP client the
gateway posts to its backends with and reads its JSON (what a gateway that does nothing else costs). ``GET`` answers
200 (readiness). bench/gateway_cpu.py reads this process's CPU per request beside the gateway's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

REPLY = json.dumps({"model": "stub", "answers": {"team": {"type": "choice", "choice": "billing", "probabilities": {
    "billing": 0.8301567115036309, "technical": 0.12416539307800148, "sales": 0.045677895418367656},
    "confidence": 0.7452350672554464}}, "usage": {"input_tokens": 60, "output_tokens": 1, "n_calls": 1,
                                                  "n_retries": 0, "latency_ms": 2.0}}, separators=(",", ":")).encode()
BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1, "logprobs": True,
                   "top_logprobs": 20, "temperature": 0}).encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(REPLY)).encode())]


def floor_app(backend: str, post: bool) -> Any:
    """The bare ASGI app; with ``post``, one backend post per request over one kept async client: the one the
    gateway posts to its backends with (``config.backend_posts``: aiohttp; a tree from before it: the SDK's httpx
    one)."""
    import openai

    from jev_shared.gateway import config

    def made() -> Any:
        http = openai.DefaultAsyncHttpxClient()
        return (config.backend_posts("", http) if hasattr(config, "backend_posts") else None) or http

    state: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                state["http"] = made()
                await send({"type": "lifespan.startup.complete"})
            await state["http"].aclose()
            return await send({"type": "lifespan.shutdown.complete"})
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        if post and scope["method"] == "POST":
            reply = await state["http"].post(backend + "/chat/completions", content=BODY,
                                             headers={"content-type": "application/json"})
            json.loads(reply.content)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": REPLY})

    return app


def main() -> None:
    import uvicorn

    from jev_shared.gateway.config import GatewayConfig
    from jev_shared.gateway.protocol import uvicorn_config

    port, backend, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    uvicorn.Server(uvicorn_config(floor_app(backend, mode == "post"), GatewayConfig(backends={}), port=port)).run()


if __name__ == "__main__":
    main()
