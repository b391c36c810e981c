"""CPU per decision: what the Python in front of a fast backend costs, against its peers, in one run.

A GPU server answers a one-token decision in milliseconds, so at scale the client's own CPU is what
runs out first. The stub backend runs in another process (its CPU is not ours); each contender makes
``--n`` calls after a warm-up, and the figure is this process's CPU time (all threads) per call.

    python -m bench cpu               # 400 calls each (the rows taking turns, 4 rounds), one and eight questions
                                      # (each row's mean, its best round and the spread; the ratios of both;
                                      # the process's voluntary / involuntary context switches a call)
    python -m bench cpu --profile     # and where the engine's time goes (cProfile, top 15)
    python -m bench cpu --pin         # this process alone on one core, the stub on another (bench/processes.py)

``python -m bench post_instructions`` (``cpu.py posts``): instructions per backend post, sync against async, and what
the async
client's settings change.

Each variant posts the same Chat Completions body (bytes built once, the same headers) to the stub backend in
another process and reads the reply's JSON; its instructions per post are two runs of this script under
valgrind's cachegrind (0 and ``--n`` posts after a warm-up) differenced, so start-up falls out and the figure
is free of the machine's load (user space only: the kernel's share of a post is not in it).

    python -m bench post_instructions [--n 300] [--only NAME ...] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from processes import cachegrind_refs, stubbed  # noqa: E402

STUB = """
import sys, time
sys.path.insert(0, {root!r})
from bench.processes import StubServer
with StubServer(latency_s=0.0) as url:
    print(url, flush=True)
    time.sleep(3600)
"""
REQUEST = {"model": "stub", "messages": [{"role": "user", "content": "Which team? I was charged twice."}],
           "max_tokens": 1, "logprobs": True, "top_logprobs": 20, "temperature": 0}


def contenders(base_url: str) -> dict[str, Callable[[], Any]]:
    import httpx
    import openai

    from jev_shared import Choice, Memory, SystemOneClient
    from jev_shared.backend import Backend, attach
    from jev_shared.direct import sdk_client

    plain = httpx.Client(base_url=base_url)
    sdk = openai.OpenAI(base_url=base_url, api_key="k", max_retries=0)
    engine = SystemOneClient(openai.OpenAI(base_url=base_url, api_key="k"), model="stub", api="chat_completions",
                             memory=Memory(), labels="letters")
    # the client LocalServer.client() builds: the SDK over an HTTP client of its own, posted with directly
    own, target = sdk_client(openai.OpenAI, openai.DefaultHttpxClient, base_url, "k")
    direct = SystemOneClient(attach(own, Backend(http=target)), model="stub", api="chat_completions", memory=Memory(),
                             labels="letters")
    team = Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs", "sales": "deals"})
    eight = {f"q{i}": team for i in range(8)}
    return {
        "httpx.Client.post, JSON parsed": lambda: json.loads(plain.post("/chat/completions", json=REQUEST).content),
        "openai with_raw_response.create, JSON parsed": lambda: json.loads(
            sdk.chat.completions.with_raw_response.create(**REQUEST).http_response.content),
        "openai chat.completions.create": lambda: sdk.chat.completions.create(**REQUEST),
        "SystemOneClient.system_one, 1 question": lambda: engine.system_one("I was charged twice.", {"team": team}),
        "SystemOneClient.system_one, 8 questions": lambda: engine.system_one("I was charged twice.", eight),
        "system_one, 1 question, direct post": lambda: direct.system_one("I was charged twice.", {"team": team}),
        "system_one, 8 questions, direct post": lambda: direct.system_one("I was charged twice.", eight),
    }


def cpu_per_call(fn: Callable[[], Any], n: int, warmup: int = 50, switches: list[float] | None = None) -> float:
    """CPU ms per call; ``switches`` (when given) gets the process's voluntary and involuntary context switches
    per call added to it (all threads: ``getrusage(RUSAGE_SELF)``: a count the machine's load does not move)."""
    for _ in range(warmup):
        fn()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.process_time()
    for _ in range(n):
        fn()
    took = (time.process_time() - start) / n * 1000.0
    after = resource.getrusage(resource.RUSAGE_SELF)
    if switches is not None:
        switches[0] += (after.ru_nvcsw - before.ru_nvcsw) / n
        switches[1] += (after.ru_nivcsw - before.ru_nivcsw) / n
    return took


def in_rounds(fns: dict[str, Callable[[], Any]], n: int, rounds: int,
              switches: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """CPU ms per call of each row in each round, the rows taking turns (``n // rounds`` calls a turn) so that a
    change in the machine's load falls on every row alike, not on whichever ran last. ``switches`` gets each
    row's context switches per call (voluntary, involuntary), the mean of the rounds."""
    turns: dict[str, list[float]] = {name: [] for name in fns}
    counts = {name: [0.0, 0.0] for name in fns}
    per = max(1, n // max(1, rounds))
    for fn in fns.values():  # the warm-up
        for _ in range(50):
            fn()
    for _ in range(max(1, rounds)):
        for name, fn in fns.items():
            turns[name].append(cpu_per_call(fn, per, warmup=0, switches=counts[name]))
    if switches is not None:
        switches.update({name: [c / max(1, rounds) for c in count] for name, count in counts.items()})
    return turns


def ratios(figures: dict[str, float], how: str) -> str:
    """The speed targets' ratios of one set of figures (the mean of the rounds, or each row's best round)."""
    post, one = figures["httpx.Client.post, JSON parsed"], figures["SystemOneClient.system_one, 1 question"]
    eight = figures["SystemOneClient.system_one, 8 questions"]
    lean, lean8 = figures["system_one, 1 question, direct post"], figures["system_one, 8 questions, direct post"]
    return (f"  {how}: one question / httpx post {one / post:.2f}x (target <= 1.5x); eight questions / "
            f"eight one-question calls {eight / (8 * one):.2f}x (target <= 1.3x)\n"
            f"  {how}, direct post: one question / httpx post {lean / post:.2f}x; eight / eight one-question calls "
            f"{lean8 / (8 * lean):.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=4, help="the rows take turns, n/rounds calls a turn")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--profile-row", default="SystemOneClient.system_one, 1 question", help="the row --profile reads")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    ap.add_argument("--pin", action="store_true", help="this process alone on one core, the stub on another")
    args = ap.parse_args()
    from bench.processes import Placement

    stub = subprocess.Popen([sys.executable, "-c", STUB.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    try:
        base_url = stub.stdout.readline().strip()  # type: ignore[union-attr]
        place = Placement(args.pin)
        place.own_rows(stub.pid)
        print(place.describe())
        fns = contenders(base_url)
        print(f"load average {os.getloadavg()[0]:.2f}; {args.n} calls each after 50 warm-up, in {args.rounds} "
              "rounds; CPU ms per call")
        switches: dict[str, list[float]] = {}
        turns = in_rounds(fns, args.n, args.rounds, switches)
        figures = {name: sum(ms) / len(ms) for name, ms in turns.items()}
        best = {name: min(ms) for name, ms in turns.items()}
        print(f"  {'':48s}   mean      best round (spread)       context switches a call (vol., invol.)")
        for name, ms in turns.items():
            vol, invol = switches[name]
            print(f"  {name:48s} {figures[name]:6.2f} ms {best[name]:6.2f} ms ({min(ms):.2f}-{max(ms):.2f})"
                  f"   {vol:5.1f} {invol:5.1f}")
        print(f"  load average at the end {os.getloadavg()[0]:.2f}")
        print(ratios(figures, "mean"))
        print(ratios(best, "best rounds"))
        if args.profile:
            prof = cProfile.Profile()
            fn = fns[args.profile_row]
            prof.runcall(lambda: [fn() for _ in range(200)])
            pstats.Stats(prof).sort_stats("tottime").print_stats(15)
        if args.json:
            args.json.write_text(json.dumps({"mean": figures, "best": best, "rounds": turns, "switches": switches},
                                            indent=1) + "\n")
    finally:
        stub.kill()


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
        return cachegrind_refs([__file__, "posts", "--one", name, "--backend", url, "--n", str(k)])

    return (refs(n) - refs(0)) / n


def main_posts() -> None:
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


SUBCOMMANDS = {"posts": main_posts}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        SUBCOMMANDS[sys.argv.pop(1)]()
    else:
        main()
