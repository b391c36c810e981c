"""A fast loopback backend for the hostile-client suite: an asyncio HTTP/1.1 server on its own thread
that answers every POST with one fixed body (keep-alive, a listen backlog for a thousand sockets).

    with FastStub(body) as stub:
        openai.AsyncOpenAI(base_url=stub.base_url, api_key="k")
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any


class FastStub:
    """``with FastStub(body) as stub: stub.base_url, stub.n_requests``; ``status`` and ``headers`` apply to every reply."""

    def __init__(self, body: Any, *, status: int = 200, headers: dict[str, str] | None = None,
                 delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        payload = json.dumps(body).encode()
        head = f"HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._reply = head.encode() + b"\r\n" + payload
        self.n_requests = 0
        self.last_headers: dict[str, str] = {}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.port = 0

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=4096))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        server.close()
        tasks = asyncio.all_tasks(self._loop)
        for task in tasks:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:] if ln)}
                await reader.readexactly(int(headers.get("content-length", "0")))
                self.n_requests += 1
                self.last_headers = headers
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                writer.write(self._reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> FastStub:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
