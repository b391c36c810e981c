"""CPU per request of the whole gateway process, and of the engine alone, over a stub in another process.

Three processes: the stub backend (latency 0), ``jev serve`` (keys on, access log to /dev/null), and
this one, the client. The gateway's CPU is read from ``/proc/<pid>/stat`` (user + system, all its
threads) around ``--cpu-n`` sequential requests after a warm-up; the engine's (sync on threads, async
over ``openai.AsyncOpenAI``, the gateway's own path) and a plain ``httpx`` post, the floor, are this
process's ``time.process_time``. Beside them, the floor under any gateway on these parts: uvicorn with
the gateway's settings serving a bare ASGI app (bench/processes.py's ``asgi``), answering at once
(``uvicorn_floor_in``) and after one backend post with the SDK's async HTTP client
(``uvicorn_floor_post``). ``--compare ROOT`` runs a second gateway from another checkout (``/work/main``)
in the same run, the two taking turns round by round.

``--split``: one request's layers apart, in one process (ASGI calls straight in, the access line to /dev/null):
the sync post and the async one (with the gateway's own backend HTTP client), ``Gateway.respond`` (the engine,
limits, metrics), FastAPI alone and the whole app with ``respond`` answering a kept response, the whole app;
``--instructions``: each layer's instructions per call (cachegrind, two runs differenced: free of the machine's
load).

    python -m bench gateway_cpu [--cpu-n 400] [--rounds 3] [--compare /work/main] [--profile out.txt]
                                [--no-engine]  # the post, the floors and the gateways only
                                [--pin]        # each measured process alone on a core (bench/processes.py)
    python -m bench gateway_cpu --split [--instructions] [--cpu-n 1000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cpu import cpu_per_call  # noqa: E402
from processes import Placement, Served, cachegrind_refs, proc_cpu_s, stubbed  # noqa: E402

from jev_shared import AsyncSystemOneClient, Choice, Memory, SystemOneClient  # noqa: E402
from jev_shared.local import free_port  # noqa: E402

STATE = "My invoice was charged twice, please refund the duplicate payment."
TEAM = Choice(instructions="Which team should handle this ticket?",
              criteria={"billing": "Invoices, refunds", "technical": "Bugs, errors", "sales": "Pricing, plans"})
SETS = {"1q": {"team": TEAM}, "8q": {f"q{i}": TEAM for i in range(8)}}
KEY = "bench-cpu-key-0123456789abcdef"


def served(root: Path, backend: str, workers: int = 1) -> Served:
    """``jev serve`` from checkout ``root`` over the stub ``backend``, its memory in the process."""
    extra = ["--workers", str(workers)] if workers > 1 else []
    return Served(["--no-cache", "--backend-url", backend, "--model", "stub", *extra], KEY, root)


class Floor(Served):
    """The bare ASGI app (bench/processes.py's ``asgi``) under uvicorn with the gateway's settings: ``mode`` "in"
    (receive and answer only) or "post" (and one backend post with the SDK's async HTTP client): the floor under any gateway on these parts."""

    def __init__(self, backend: str, mode: str) -> None:  # Served's readiness and exit, another command
        self.port = free_port()
        self.proc = subprocess.Popen([sys.executable, str(ROOT / "bench" / "processes.py"), "asgi", str(self.port),
                                      backend, mode], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        self.health = {}


def body_for(questions: dict[str, Any]) -> bytes:
    return json.dumps({"model": "stub", "state": STATE,
                       "questions": {k: q.model_dump(exclude_none=True) for k, q in questions.items()}}).encode()


def gateway_cpu_ms(gw: Served, http: httpx.Client, body: bytes, n: int, warmup: int = 50) -> float:
    """The gateway process's CPU per request, ``n`` sequential requests after ``warmup``."""
    def post() -> None:
        resp = http.post(gw.url + "/v1/systemone", content=body, headers={"content-type": "application/json"})
        resp.raise_for_status()

    for _ in range(warmup):
        post()
    start = proc_cpu_s(gw.proc.pid)
    for _ in range(n):
        post()
    return (proc_cpu_s(gw.proc.pid) - start) / n * 1000.0


def async_cpu_ms(backend: str, questions: dict[str, Any], n: int, warmup: int = 50, direct: bool = False,
                 posts: Any = None) -> float:
    """The async engine over ``openai.AsyncOpenAI``, this process's CPU per call; ``direct``: over the client
    ``LocalServer.async_client()`` builds (its own HTTP client, posted with directly: direct.py), ``posts`` the
    maker of what the engine posts with instead (the gateway's: :func:`_gateway_posts`)."""
    import openai

    from jev_shared.backend import Backend as Described
    from jev_shared.backend import attach
    from jev_shared.direct import sdk_client

    async def run() -> float:
        extra = {"posts": posts()} if posts is not None else {}
        sdk, target = sdk_client(openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient, backend, "k", max_retries=0,
                                 **extra)
        if direct:
            attach(sdk, Described(http=target))
        engine = AsyncSystemOneClient(sdk, model="stub", api="chat_completions", memory=Memory())
        for _ in range(warmup):
            await engine.system_one(STATE, questions)
        start = time.process_time()
        for _ in range(n):
            await engine.system_one(STATE, questions)
        spent = (time.process_time() - start) / n * 1000.0
        await sdk.close()  # and its HTTP client
        if target is not None and target.http is not sdk._client:  # noqa: SLF001 - an aiohttp session warns if open
            await target.http.aclose()
        return spent

    return asyncio.run(run())


def engine_figures(backend: str, n: int) -> dict[str, float]:
    """The floor (httpx post) and the engine alone, sync and async, one and eight questions."""
    import openai

    sync = SystemOneClient(openai.OpenAI(base_url=backend, api_key="k"), model="stub", api="chat_completions",
                           memory=Memory())
    out = {"httpx_post_ms": post_ms(backend, n)}
    for name, qs in SETS.items():
        out[f"engine_sync_{name}_ms"] = cpu_per_call(lambda qs=qs: sync.system_one(STATE, qs), n)
        out[f"engine_async_{name}_ms"] = async_cpu_ms(backend, qs, n)
        out[f"engine_async_direct_{name}_ms"] = async_cpu_ms(backend, qs, n, direct=True)
        out[f"engine_async_gateway_{name}_ms"] = async_cpu_ms(backend, qs, n, direct=True, posts=_gateway_posts)
    return out


def post_ms(backend: str, n: int) -> float:
    """The floor: a plain ``httpx`` post of a Chat Completions body, its JSON read, this process's CPU."""
    plain = httpx.Client()
    req = {"model": "stub", "messages": [{"role": "user", "content": STATE}], "max_tokens": 1, "logprobs": True,
           "top_logprobs": 20, "temperature": 0}
    return cpu_per_call(lambda: json.loads(plain.post(backend + "/chat/completions", json=req).content), n)


def run_cpu(n: int, rounds: int, compare: list[Path], workers: int = 1, engine: bool = True,
            pin: bool = False) -> dict[str, Any]:
    """Every contender, ``rounds`` times in turn; the median of each. Needs nothing else running. ``pin``: each
    measured process alone on a core (bench/processes.py), the others on another."""
    place = Placement(pin)
    print(place.describe(), file=sys.stderr, flush=True)
    with stubbed() as (backend, stub):
        roots = {"this": ROOT, **{str(r): r for r in compare}}
        samples: dict[str, list[float]] = {}
        http = httpx.Client(headers={"authorization": f"Bearer {KEY}"}, timeout=60)
        for _ in range(rounds):
            place.own_rows(stub)
            own = engine_figures(backend, n) if engine else {"httpx_post_ms": post_ms(backend, n)}
            for name, value in own.items():
                samples.setdefault(name, []).append(value)
            for mode in ("in", "post"):
                with Floor(backend, mode) as floor:
                    place.served_rows(floor.proc.pid, stub)
                    samples.setdefault(f"uvicorn_floor_{mode}_ms", []).append(
                        gateway_cpu_ms(floor, http, body_for(SETS["1q"]), n))
            for label, root in roots.items():
                with served(root, backend, workers) as gw:
                    place.served_rows(gw.proc.pid, stub)
                    for qname, qs in SETS.items():
                        value = gateway_cpu_ms(gw, http, body_for(qs), n)
                        samples.setdefault(f"gateway[{label}]_{qname}_ms", []).append(value)
        figures = {k: round(statistics.median(v), 3) for k, v in samples.items()}
        floor = figures["httpx_post_ms"]
        ratios = {k.replace("_ms", "_x_httpx"): round(v / floor, 2) for k, v in figures.items() if k != "httpx_post_ms"}
        return {"n": n, "rounds": rounds, "load_average": round(os.getloadavg()[0], 2), "placement": place.describe(),
                "cpu_ms": figures,
                "ratio_to_httpx_post": ratios, "samples": {k: [round(x, 3) for x in v] for k, v in samples.items()}}


def _asgi_post(app: Any, body: bytes) -> Any:
    """One ``POST /v1/systemone`` straight into the ASGI app (no socket, no uvicorn): the app's own work."""
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": "/v1/systemone", "raw_path": b"/v1/systemone", "query_string": b"", "root_path": "",
             "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
             "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                         (b"authorization", f"Bearer {KEY}".encode()), (b"content-length", str(len(body)).encode())]}
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    async def call() -> None:
        await app(scope, receive, send)
        assert sent[0]["status"] == 200, sent

    return call


def profile_gateway(n: int, out: Path) -> None:
    """cProfile (CPU time) of the gateway app in this process, ASGI calls straight in, over the stub."""
    with stubbed() as (backend, _):
        calls = _split_calls(backend)
        call = calls["app"]
        prof = cProfile.Profile(time.process_time)

        async def run() -> None:
            for _ in range(50):
                await call()
            prof.enable()
            for _ in range(n):
                await call()
            prof.disable()
            await calls["close"]()

        asyncio.run(run())
        _write(prof, out)


def _write(prof: cProfile.Profile, out: Path) -> None:
    with out.open("w") as f:
        stats = pstats.Stats(prof, stream=f)
        stats.sort_stats("tottime").print_stats(45)
        stats.sort_stats("cumulative").print_stats(80)


def profile_async_engine(n: int, out: Path) -> None:
    """cProfile of the async engine alone (this process), ``n`` one-question calls."""
    with stubbed() as (backend, _):
        async_cpu_ms(backend, SETS["1q"], 20)
        prof = cProfile.Profile(time.process_time)
        prof.runcall(async_cpu_ms, backend, SETS["1q"], n, 10)
        _write(prof, out)


#: One request's layers, measured apart (``--split``); the derived rows subtract them.
LAYERS = ("sync_post", "async_post", "respond", "fastapi_kept", "app_kept", "app")


def _gateway_posts() -> Any:
    """What the gateway posts its backends' requests with: ``config.backend_posts`` (aiohttp); a tree from before it,
    its ``backend_http`` client, or before that the SDK's httpx one."""
    import openai

    from jev_shared.gateway import config

    http = openai.DefaultAsyncHttpxClient()
    if hasattr(config, "backend_posts"):
        return config.backend_posts("", http) or http
    return getattr(config, "backend_http", lambda: http)()


def _split_calls(backend: str) -> dict[str, Any]:
    """Each layer as a coroutine function of no arguments, over one gateway app (``async_post``: with the HTTP
    client the gateway's backend clients post with)."""
    from fastapi import FastAPI

    from jev_shared.gateway import Backend, GatewayConfig
    from jev_shared.gateway.app import create_app
    from jev_shared.gateway.logs import configure_logging
    from jev_shared.gateway.schema import SystemOneRequest

    with contextlib.redirect_stdout(open(os.devnull, "w")):  # noqa: SIM115 - the access line's handler keeps it
        configure_logging("warning")
    app = create_app(GatewayConfig(backends={"stub": Backend(backend, "stub")}, api_keys=frozenset({KEY}),
                                   cache=False))
    gw, inner = app.gateway, app
    while not isinstance(inner, FastAPI):
        inner = inner.app
    gw.pool.warm()
    body = body_for(SETS["1q"])
    req = SystemOneRequest.model_validate_json(body)
    plain, http = httpx.Client(), _gateway_posts()
    chat = {"model": "stub", "messages": [{"role": "user", "content": STATE}], "max_tokens": 1, "logprobs": True,
            "top_logprobs": 20, "temperature": 0}
    raw = json.dumps(chat).encode()
    response: list[Any] = []

    async def async_post() -> None:
        json.loads((await http.post(backend + "/chat/completions", content=raw,
                                    headers={"content-type": "application/json"})).content)

    async def kept_response(req: Any, key: Any, noted: dict[str, Any]) -> Any:
        noted.update(model=req.model, n_questions=len(req.questions))
        return response[0]

    def kept(target: Any) -> Any:
        async def call() -> None:
            gw.respond = kept_response  # this instance only: answer_json reads it off self
            try:
                await asgi()
            finally:
                del gw.respond

        asgi = _asgi_post(target, body)
        return call

    async def respond() -> None:
        response[:] = [await gw.respond(req, KEY, {})]

    async def sync_post() -> None:  # blocking, as the bench's client posts; a coroutine only to be timed alike
        json.loads(plain.post(backend + "/chat/completions", json=chat).content)

    async def close() -> None:  # the HTTP clients, on the loop they posted on (an aiohttp session warns if not)
        await http.aclose()
        await gw.pool.aclose()

    return {"sync_post": sync_post,
            "async_post": async_post, "respond": respond, "fastapi_kept": kept(inner), "app_kept": kept(app),
            "app": _asgi_post(app, body), "close": close}


def split_cpu_ms(backend: str, n: int, rounds: int, only: str | None = None) -> dict[str, list[float]]:
    """CPU ms per call of each layer, ``rounds`` times in turn (``only``: that layer, once, for cachegrind)."""
    import uvloop

    calls = _split_calls(backend)
    out: dict[str, list[float]] = {}

    async def run() -> None:
        await calls["respond"]()  # keeps the response the "_kept" layers answer with
        for _ in range(1 if only else rounds):
            for name in [only] if only else LAYERS:
                call = calls[name]
                for _ in range(20):
                    await call()
                start = time.process_time()
                for _ in range(n):
                    await call()
                out.setdefault(name, []).append((time.process_time() - start) / max(n, 1) * 1000.0)
        await calls["close"]()

    uvloop.run(run())
    return out


def split_instructions(backend: str, n: int) -> dict[str, list[float]]:
    """Instructions per call of each layer: this script under cachegrind with ``--split-one`` for 0 and ``n``
    calls, differenced (what starting Python and the app costs falls out)."""

    def refs(layer: str, k: int) -> int:
        return cachegrind_refs([__file__, "--split-one", layer, "--backend", backend, "--cpu-n", str(k)])

    return {layer: [(refs(layer, n) - refs(layer, 0)) / n] for layer in LAYERS}


def run_split(n: int, rounds: int, instructions: bool, pin: bool = False) -> dict[str, Any]:
    """``--split``: each layer's median, and the rows derived from them (``pin``: this process alone on a core)."""
    place = Placement(pin)
    print(place.describe(), file=sys.stderr, flush=True)
    with stubbed() as (backend, stub):
        place.own_rows(stub)
        samples = split_instructions(backend, n) if instructions else split_cpu_ms(backend, n, rounds)
    f = {k: statistics.median(v) for k, v in samples.items()}
    derived = {"middlewares (ours, the access line)": f["app_kept"] - f["fastapi_kept"],
               "FastAPI, validation, serialisation": f["fastapi_kept"],
               "respond beyond the async post (engine, limits, metrics)": f["respond"] - f["async_post"],
               "app beyond app_kept + respond (tasks, the engine's call in the app)":
                   f["app"] - f["app_kept"] - f["respond"]}
    scale = 1.0 / f["sync_post"]
    return {"n": n, "rounds": 1 if instructions else rounds, "unit": "instructions" if instructions else "cpu_ms",
            "load_average": round(os.getloadavg()[0], 2), "layers": {k: round(v, 3) for k, v in f.items()},
            "derived": {k: round(v, 3) for k, v in derived.items()},
            "x_sync_post": {k: round(v * scale, 2) for k, v in {**f, **derived}.items()},
            "samples": {k: [round(x, 3) for x in v] for k, v in samples.items()}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cpu-n", type=int, default=400)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--compare", type=Path, action="append", default=[], help="another checkout's gateway too")
    p.add_argument("--profile", type=Path, help="write a cProfile of the gateway process here (and no figures)")
    p.add_argument("--profile-engine", type=Path, help="write a cProfile of the async engine here")
    p.add_argument("--json", type=Path)
    p.add_argument("--no-engine", action="store_true", help="the post, the floors and the gateways only")
    p.add_argument("--pin", action="store_true", help="each measured process alone on a core (bench/processes.py)")
    p.add_argument("--split", action="store_true", help="one request's layers apart, in this process")
    p.add_argument("--instructions", action="store_true", help="with --split: instructions (cachegrind), not CPU")
    p.add_argument("--split-one", choices=LAYERS, help=argparse.SUPPRESS)
    p.add_argument("--backend", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.split_one:  # one layer, once, for --instructions (under cachegrind)
        split_cpu_ms(args.backend, args.cpu_n, 1, only=args.split_one)
        return
    if args.profile or args.profile_engine:
        if args.profile:
            profile_gateway(args.cpu_n, args.profile)
        if args.profile_engine:
            profile_async_engine(args.cpu_n, args.profile_engine)
        return
    result = (run_split(args.cpu_n, args.rounds, args.instructions, args.pin) if args.split else
              run_cpu(args.cpu_n, args.rounds, args.compare, engine=not args.no_engine, pin=args.pin))
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
