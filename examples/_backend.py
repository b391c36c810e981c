"""Pick the backend for the examples: your provider when OPENAI_API_KEY is set, else the embedded model."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def backend(async_client: bool = False) -> Iterator[tuple[Any, str, str]]:
    """Yield (openai client, model name, a description of where it runs)."""
    if os.environ.get("OPENAI_API_KEY"):
        import openai

        cls = openai.AsyncOpenAI if async_client else openai.OpenAI
        model = os.environ.get("JEV_MODEL", "gpt-4o-mini")
        client = cls(base_url=os.environ.get("OPENAI_BASE_URL") or None)
        yield client, model, f"{model} at {os.environ.get('OPENAI_BASE_URL', 'api.openai.com')}"
        return
    from jev_shared.local import DEMO_MODEL, WIRE_MODEL, LocalModelError, LocalServer, cache_dir

    model = os.environ.get("JEV_MODEL") or DEMO_MODEL
    started = time.monotonic()
    print(f"starting the embedded model {model} (llama.cpp, in-process; the first run assembles it "
          f"into {cache_dir()}, about 4 s) ...", flush=True)
    try:
        server = LocalServer(model=model).start()
    except LocalModelError as exc:  # the capable model's parts are not installed: say so, use the small one
        print(f"note: {exc}\nnote: falling back to {WIRE_MODEL}, whose decisions are near chance\n", flush=True)
        server = LocalServer(model=WIRE_MODEL).start()
    print(f"  ready in {time.monotonic() - started:.1f} s ({server.n_threads} threads)", flush=True)
    try:  # not `with server`: its __enter__ would start the model a second time
        client = server.async_client() if async_client else server.client()
        yield client, server.model, f"{server.model} on the embedded llama.cpp server (no API key set)"
    finally:
        server.stop()
