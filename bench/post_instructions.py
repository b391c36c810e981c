"""Instructions per backend post, sync against async, and what the async client's settings change (issue 33).

Each variant posts the same Chat Completions body (bytes built once, the same headers) to the stub backend in
another process and reads the reply's JSON; its instructions per post are two runs of this script under
valgrind's cachegrind (0 and ``--n`` posts after a warm-up) differenced, so start-up falls out and the figure
is free of the machine's load (user space only: the kernel's share of a post is not in it).

    python bench/post_instructions.py [--n 300] [--only NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from processes import cachegrind_refs, stubbed  # noqa: E402

BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1,
                   "logprobs": True, "top_logprobs": 20, "temperature": 0}).encode()
HEADERS = {"accept": "application/json", "content-type": "application/json", "authorization": "Bearer k"}


def _sync(make: Callable[[], Any]) -> Callable[[str], Any]:
    def build(url: str) -> Any:
        http = make()
        return lambda: json.loads(http.post(url, content=BODY, headers=HEADERS).content)
    return build


def _async(make: Callable[[], Any], loop: str = "uvloop", direct: bool = False) -> Callable[[str], Any]:
    """An async post; ``direct``: as ``direct.apost`` calls it (the URL and headers as the client's own kinds,
    the SDK client's timeout passed per request)."""
    def build(url: str) -> Any:
        http = make()
        target, headers, extra = url, HEADERS, {}
        if direct:
            target, headers = type(http.base_url)(url), type(http.headers)(HEADERS)
            extra = {"timeout": http.timeout}

        async def call() -> None:
            json.loads((await http.post(target, content=BODY, headers=headers, **extra)).content)
        return loop, call, http.aclose  # closed on its loop (an aiohttp session warns when collected open)
    return build


def _aiohttp_session(url: str) -> Any:
    """A plain ``aiohttp.ClientSession`` post (no httpx2 request or response around it): what the SDK's aiohttp
    client costs beneath its httpx2 layer."""
    import aiohttp

    held: dict[str, Any] = {}

    async def call() -> None:
        session = held.get("s") or held.setdefault("s", aiohttp.ClientSession())
        async with session.post(url, data=BODY, headers=HEADERS) as response:
            json.loads(await response.read())

    async def close() -> None:
        if "s" in held:
            await held["s"].close()
    return "uvloop", call, close


def variants() -> dict[str, Callable[[str], Any]]:
    import httpx
    import httpx2
    import openai

    return {
        "sync httpx.Client": _sync(httpx.Client),
        "sync openai.DefaultHttpxClient (httpx2)": _sync(openai.DefaultHttpxClient),
        "async openai.DefaultAsyncHttpxClient, uvloop": _async(openai.DefaultAsyncHttpxClient),
        "async DefaultAsyncHttpxClient as direct.apost posts": _async(openai.DefaultAsyncHttpxClient, direct=True),
        "async DefaultAsyncHttpxClient, asyncio loop": _async(openai.DefaultAsyncHttpxClient, "asyncio"),
        "async httpx.AsyncClient, uvloop": _async(httpx.AsyncClient),
        "async httpx2.AsyncClient() plain": _async(httpx2.AsyncClient),
        "async DefaultAsyncHttpxClient, timeout=None": _async(lambda: openai.DefaultAsyncHttpxClient(timeout=None)),
        "async DefaultAsyncHttpxClient, trust_env=False": _async(
            lambda: openai.DefaultAsyncHttpxClient(trust_env=False)),
        "async DefaultAsyncHttpxClient, follow_redirects=False": _async(
            lambda: openai.DefaultAsyncHttpxClient(follow_redirects=False)),
        "async openai.DefaultAioHttpClient (aiohttp), uvloop": _async(openai.DefaultAioHttpClient),
        "async DefaultAioHttpClient as direct.apost posts": _async(openai.DefaultAioHttpClient, direct=True),
        "async DefaultAioHttpClient as direct.apost posts, asyncio loop": _async(openai.DefaultAioHttpClient,
                                                                                 "asyncio", direct=True),
        "async aiohttp.ClientSession, uvloop": _aiohttp_session,
    }


def run_one(name: str, url: str, n: int) -> None:
    built = variants()[name](url)
    if not isinstance(built, tuple):
        for _ in range(50 + n):
            built()
        return
    loop, call, close = built

    async def many() -> None:
        for _ in range(50 + n):
            await call()
        await close()

    if loop == "uvloop":
        import uvloop
        uvloop.run(many())
    else:
        asyncio.run(many())


def instructions(name: str, url: str, n: int) -> float:
    def refs(k: int) -> int:
        return cachegrind_refs([__file__, "--one", name, "--backend", url, "--n", str(k)])

    return (refs(n) - refs(0)) / n


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--only", action="append", help="a variant's name (repeatable); default every one")
    p.add_argument("--json", type=Path)
    p.add_argument("--one", help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        run_one(args.one, args.backend, args.n)
        return
    out: dict[str, float] = {}
    with stubbed() as (backend, _):
        url = backend + "/chat/completions"
        for name in args.only or list(variants()):
            out[name] = round(instructions(name, url, args.n) / 1e6, 3)
            print(f"{out[name]:6.3f} M  {name}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
