"""Scale-out on one machine: ``jev serve --workers N`` on one model server, and on two behind nginx.

Stub model servers (``bench/stub_server.py``, ``--latency`` seconds a call, each in a process of its
own), ``jev serve`` subprocesses from this checkout, ``examples/deploy/nginx.conf`` balancing two of
them; the client is one asyncio process of ``--clients`` concurrent httpx clients, ``--per-client``
one-question requests each, after a warm-up round of the same. Prints one JSON object: throughput, p50 / p99 latency and errors for each
layout, with the load average (docs/gateway.md, "Workers and scaling out").

    python bench/gateway_scale.py [--clients 64] [--per-client 20] [--latency 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gateway_cpu import KEY, SETS, body_for  # noqa: E402
from served import Served  # noqa: E402

from tests.gateway.proxy import NGINX, nginx  # noqa: E402

STUB = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/bench")
from gateway import stub_body
from stub_server import StubServer
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


def main() -> None:
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


if __name__ == "__main__":
    main()
