"""The gateway's cost: `jev serve` against calling the engine directly, over a stub and the embedded model.

One run, three parts:

1. Stub backend (fixed latency, default 20 ms), one client: the engine called directly
   (``AsyncSystemOneClient`` over ``openai.AsyncOpenAI``) and through the gateway (``POST
   /v1/systemone`` over httpx), taking turns call by call; the gateway's overhead is the p50 difference.
2. Stub backend, 32 concurrent clients: throughput, p50, p99 and errors, direct and through the gateway.
3. The embedded SmolLM2 model (``LocalServer()``), one client and 4 concurrent clients, direct and
   through the gateway in front of that same server (one model server on the machine, not two).
4. CPU per request of the whole gateway process and of the engine alone, one and eight questions
   (``bench/gateway_cpu.py``: the stub in its own process), beside a plain httpx post.
5. ``--workers 2`` against one worker: throughput and errors under ``--worker-clients`` (64) clients.

``--compare ROOT`` runs a second gateway from another checkout (``/work/main``) in parts 1, 4 and 5,
taking turns with this one, so before and after come from the same run.

The gateway runs as a real ``jev serve`` subprocess (keys on, access log to /dev/null); the stub runs
in this process. One choice question per request, the gateway's defaults.

    python -m bench gateway [--n 200] [--clients 32] [--latency-ms 20] [--local-n 20] [--no-local]
                            [--cpu-n 400] [--no-cpu] [--worker-clients 64] [--no-workers] [--compare /work/main]

Targets: overhead <= 2 ms p50 on the stub; 0 errors under 32 concurrent clients.

``python -m bench gateway_scale`` (``gateway.py scale``): scale-out on one machine: ``jev serve --workers N`` on one
model server, and on two behind nginx.

Stub model servers (``bench/processes.py``'s ``StubServer``, ``--latency`` seconds a call, each in a process of its
own), ``jev serve`` subprocesses from this checkout, ``examples/deploy/nginx.conf`` balancing two of
them; the client is one asyncio process of ``--clients`` concurrent httpx clients, ``--per-client``
one-question requests each, after a warm-up round of the same. Prints one JSON object: throughput, p50 / p99 latency and errors for each
layout, with the load average (docs/gateway.md, "Workers and scaling out").

    python -m bench gateway_scale [--clients 64] [--per-client 20] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gateway_cpu import SETS, body_for, run_cpu  # noqa: E402
from processes import Served, StubServer  # noqa: E402

from jev_shared import AsyncSystemOneClient, Choice  # noqa: E402
from jev_shared.local import WIRE_MODEL, LocalServer  # noqa: E402
from tests.gateway.proxy import NGINX, nginx  # noqa: E402

STATE = "My invoice was charged twice, please refund the duplicate payment."
TEAM = Choice(instructions="Which team should handle this ticket?",
              criteria={"billing": "Invoices, refunds", "technical": "Bugs, errors", "sales": "Pricing, plans"})
QUESTIONS = {"team": TEAM}
KEY = "bench-" + secrets.token_hex(12)


def stub_body() -> bytes:
    """A one-token reply whose window holds the option names (the engine's default labels)."""
    window = [{"token": t, "logprob": lp, "bytes": list(t.encode())}
              for t, lp in (("billing", -0.1), ("technical", -2.0), ("sales", -3.0), ("The", -5.0))]
    return json.dumps({"id": "b", "object": "chat.completion", "created": 0, "model": "stub",
                       "choices": [{"index": 0, "finish_reason": "length",
                                    "message": {"role": "assistant", "content": "billing"},
                                    "logprobs": {"content": [{**window[0], "top_logprobs": window}]}}],
                       "usage": {"prompt_tokens": 60, "completion_tokens": 1, "total_tokens": 61}}).encode()


class Gateway(Served):
    """``jev serve`` over ``backend`` (base URL, model), or the embedded model when None; ``models`` it serves."""

    def __init__(self, backend: tuple[str, str] | None, root: Path = ROOT, workers: int = 1) -> None:
        args = ["--backend-url", backend[0], "--model", backend[1]] if backend else []
        args += ["--workers", str(workers), "--max-calls-per-key", "256"] if workers > 1 else []
        super().__init__(args, KEY, root)

    @property
    def models(self) -> list[str]:
        return self.health["models"]


def callers(base_url: str, model: str, gw: Gateway) -> tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]:
    """(direct engine call, call through the gateway), each raising on a failed answer."""
    engine = AsyncSystemOneClient(openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0), model=model,
                                  api="chat_completions")

    async def direct() -> Any:
        return await engine.system_one(STATE, QUESTIONS)

    return direct, via(gw)


def via(gw: Gateway) -> Callable[[], Awaitable[Any]]:
    """A call through the gateway (one choice question), raising on a failed answer."""
    http = httpx.AsyncClient(base_url=gw.url, headers={"authorization": f"Bearer {KEY}"}, timeout=120,
                             limits=httpx.Limits(max_connections=256, max_keepalive_connections=256))
    body = {"model": gw.models[0], "state": STATE, "questions": {k: q.model_dump(exclude_none=True)
                                                                 for k, q in QUESTIONS.items()}}

    async def via_gateway() -> Any:
        resp = await http.post("/v1/systemone", json=body)
        resp.raise_for_status()
        return resp.json()

    return via_gateway


#: What failed, by kind (an HTTP status with the error type, or the exception's class): printed with the figures.
FAILURES: Counter[str] = Counter()


async def timed(fn: Callable[[], Awaitable[Any]]) -> float | None:
    start = time.perf_counter()
    try:
        await fn()
    except httpx.HTTPStatusError as exc:  # an error is counted, not raised
        FAILURES[f"{exc.response.status_code} {exc.response.text[:120]}"] += 1
        return None
    except Exception as exc:  # noqa: BLE001
        FAILURES[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1
        return None
    return (time.perf_counter() - start) * 1000.0


async def turns(direct: Callable[[], Awaitable[Any]], gateway: Callable[[], Awaitable[Any]], n: int,
                others: dict[str, Callable[[], Awaitable[Any]]] | None = None) -> dict[str, Any]:
    """One client: direct, the gateway (and ``others``, other checkouts' gateways) take turns call by call,
    a warm-up call each first; each gateway's overhead is its p50 less the direct call's."""
    fns = {"direct": direct, "gateway": gateway, **(others or {})}
    for fn in fns.values():
        await fn()
    samples: dict[str, list[float | None]] = {name: [] for name in fns}
    for _ in range(n):
        for name, fn in fns.items():
            samples[name].append(await timed(fn))
    out = {name: summary(xs, None) for name, xs in samples.items()}
    for name in fns:
        if name != "direct":
            key = "overhead_p50_ms" if name == "gateway" else f"overhead_p50_ms[{name}]"
            out[key] = round(out[name]["p50_ms"] - out["direct"]["p50_ms"], 2)
    return out


async def concurrent(fn: Callable[[], Awaitable[Any]], clients: int, per_client: int) -> dict[str, Any]:
    async def client() -> list[float | None]:
        return [await timed(fn) for _ in range(per_client)]

    start = time.perf_counter()
    results = await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - start
    return summary([x for r in results for x in r], wall)


def summary(samples: list[float | None], wall_s: float | None) -> dict[str, Any]:
    ok = sorted(x for x in samples if x is not None)
    out: dict[str, Any] = {"n": len(samples), "errors": len(samples) - len(ok)}
    if ok:
        out["p50_ms"] = round(statistics.median(ok), 2)
        out["p99_ms"] = round(ok[min(len(ok) - 1, int(0.99 * len(ok)))], 2)
    if wall_s:
        out["throughput_rps"] = round(len(ok) / wall_s, 1)
    return out


async def run_stub(args: argparse.Namespace) -> dict[str, Any]:
    with StubServer(args.latency_ms / 1000.0, body=stub_body()) as base_url, Gateway((base_url, "stub")) as gw:
        direct, gateway = callers(base_url, "stub", gw)
        with ExitStack() as stack:  # other checkouts' gateways, in the same turns
            others = {str(root): via(stack.enter_context(Gateway((base_url, "stub"), root))) for root in args.compare}
            seq = await turns(direct, gateway, args.n, others)
        per = max(1, args.n // 4)
        conc = {"direct": await concurrent(direct, args.clients, per),
                "gateway": await concurrent(gateway, args.clients, per)}
        return {"latency_ms": args.latency_ms, "one_client": seq, f"{args.clients}_clients": conc}


async def run_workers(args: argparse.Namespace) -> dict[str, Any]:
    """One gateway process against ``--workers 2``, each under ``--worker-clients`` concurrent clients."""
    out: dict[str, Any] = {"clients": args.worker_clients, "latency_ms": args.latency_ms}
    per = max(1, args.n // 4)
    with StubServer(args.latency_ms / 1000.0, body=stub_body()) as base_url:
        for root, workers in ((ROOT, 1), (ROOT, 2), *((r, 1) for r in args.compare)):  # others: no --workers
            with Gateway((base_url, "stub"), root, workers) as gw:
                await concurrent(via(gw), 8, 4)  # warm every worker's engine client
                name = f"workers_{workers}" + ("" if root == ROOT else f"[{root}]")
                out[name] = await concurrent(via(gw), args.worker_clients, per)
    return out


async def run_local(args: argparse.Namespace) -> dict[str, Any]:
    with LocalServer(WIRE_MODEL) as srv:  # direct: the engine against its own embedded server
        gw_free = Gateway((srv.base_url, srv.model))
        with gw_free as gw:  # the gateway in front of the same server, so both read the same model
            direct, gateway = callers(srv.base_url, srv.model, gw)
            seq = await turns(direct, gateway, args.local_n)
            conc = {"direct": await concurrent(direct, 4, max(1, args.local_n // 4)),
                    "gateway": await concurrent(gateway, 4, max(1, args.local_n // 4))}
    return {"model": srv.model, "one_client": seq, "4_clients": conc}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=200)
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--local-n", type=int, default=20)
    p.add_argument("--no-local", action="store_true")
    p.add_argument("--cpu-n", type=int, default=400, help="requests per CPU figure")
    p.add_argument("--cpu-rounds", type=int, default=3)
    p.add_argument("--no-cpu", action="store_true")
    p.add_argument("--worker-clients", type=int, default=64)
    p.add_argument("--no-workers", action="store_true")
    p.add_argument("--compare", type=Path, action="append", default=[], help="another checkout's gateway too")
    p.add_argument("--json", type=Path, help="write the result here too")
    args = p.parse_args()
    result: dict[str, Any] = {"load_average": [round(x, 2) for x in os.getloadavg()]}
    result["stub"] = asyncio.run(run_stub(args))
    if not args.no_cpu:
        result["cpu"] = run_cpu(args.cpu_n, args.cpu_rounds, args.compare)
    if not args.no_workers:
        result["workers"] = asyncio.run(run_workers(args))
    if not args.no_local:
        result["embedded"] = asyncio.run(run_local(args))
    result["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    result["failures"] = dict(FAILURES)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")


STUB = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/bench")
from gateway import stub_body
from processes import StubServer
with StubServer(latency_s={latency}, body=stub_body()) as url:
    print(url, flush=True)
    time.sleep(3600)
"""


@contextmanager
def stub(latency: float) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-c", STUB.format(root=str(ROOT), latency=latency)],
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc.stdout.readline().strip()  # type: ignore[union-attr]
    finally:
        proc.kill()
        proc.wait()


def serve(backend: str, workers: int) -> Served:
    return Served(["--no-cache", "--backend-url", backend, "--model", "stub", "--workers", str(workers),
                   "--max-calls-per-key", "1024", "--max-connections", "1024"], KEY)


async def load(url: str, clients: int, per_client: int) -> dict[str, Any]:
    body = body_for(SETS["1q"])
    headers = {"authorization": f"Bearer {KEY}", "content-type": "application/json"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=60) as http:
        async def one() -> list[tuple[float, int]]:
            out = []
            for _ in range(per_client):
                started = time.perf_counter()
                try:
                    status = (await http.post("/v1/systemone", content=body)).status_code
                except httpx.HTTPError:
                    status = 0
                out.append((time.perf_counter() - started, status))
            return out

        await asyncio.gather(*(one() for _ in range(clients)))  # warm-up: every worker's clients and connections
        started = time.perf_counter()
        results = [r for rs in await asyncio.gather(*(one() for _ in range(clients))) for r in rs]
        took = time.perf_counter() - started
    times = sorted(t for t, _ in results)
    return {"requests": len(results), "req_per_s": round(len(results) / took, 1),
            "p50_ms": round(statistics.median(times) * 1000, 1),
            "p99_ms": round(times[int(0.99 * (len(times) - 1))] * 1000, 1),
            "errors": sum(1 for _, s in results if s != 200), "load_average": round(os.getloadavg()[0], 2)}


def main_scale() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--per-client", type=int, default=20)
    p.add_argument("--latency", type=float, default=0.02)
    args = p.parse_args()
    out: dict[str, Any] = {"clients": args.clients, "per_client": args.per_client, "latency_s": args.latency}
    for workers in (1, 2):
        with stub(args.latency) as backend, serve(backend, workers) as gw:
            out[f"one model server, --workers {workers}"] = asyncio.run(load(gw.url, args.clients, args.per_client))
    if NGINX is None:
        out["two model servers"] = "skipped: nginx is not installed"
    else:
        with ExitStack() as stack:
            urls = [stack.enter_context(serve(stack.enter_context(stub(args.latency)), 2)).url for _ in range(2)]
            proxy = stack.enter_context(nginx(*urls, limit_conn="per_client 1024"))
            out["two model servers, --workers 2 each, nginx"] = asyncio.run(load(proxy, args.clients, args.per_client))
    print(json.dumps(out, indent=1))


SUBCOMMANDS = {"scale": main_scale}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        SUBCOMMANDS[sys.argv.pop(1)]()
    else:
        main()
