"""Decisions per second on the embedded server with 1, 2 and 4 parallel slots, beside bare calls of the same prompts.

For each slot count a fresh ``LocalServer(n_parallel=N)`` of the default model (1.5B unless ``--model``) is started;
the routing question of ``bench/batch_data.py`` is prepared (its prior paid, not timed), then ``--n`` tickets are
decided through the engine with ``decide_batch`` at concurrency N, every request the engine sends recorded. The
very same requests are then replayed bare (``chat.completions.create``, no engine) on N threads against the same
server: the server's own rate on those prompts. Each row prints both rates, their ratio and the load average, so a
figure is only ever read beside its bare one from the same run and server.

    python -m bench slots_throughput [--n 24] [--slots 1,2,4] [--model qwen2.5-coder-1.5b] [--json out.json]

Figures, not assertions: the machine is shared; llama.cpp batches the parallel slots' tokens into one forward pass,
so more slots help where the cores are not already busy with one sequence's prefill.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from batch_data import ROUTING, labelled  # noqa: E402

from jev_shared import SystemOneClient  # noqa: E402
from jev_shared.backend import Backend  # noqa: E402
from jev_shared.batch import decide_batch  # noqa: E402
from jev_shared.local import DEFAULT_MODEL, LocalServer  # noqa: E402


@dataclass
class Rate:
    """One slot count's figures: the engine's decisions and the bare replay of its requests."""

    slots: int
    decisions: int
    engine_s: float
    engine_calls: int
    engine_p50_ms: float
    bare_calls: int
    bare_s: float
    bare_p50_ms: float
    load: tuple[float, float]

    @property
    def per_s(self) -> float:
        return self.decisions / self.engine_s if self.engine_s else 0.0

    @property
    def bare_per_s(self) -> float:
        return self.bare_calls / self.bare_s if self.bare_s else 0.0


def recording(client: Any) -> list[dict[str, Any]]:
    """The JSON body of every chat completion ``client`` posts (its HTTP client's request hook, so the engine
    runs as a user's would: the embedded server's own client, its direct posts and exact readout)."""
    calls: list[dict[str, Any]] = []
    target = Backend.of(client).http
    http = target.http if target is not None else client._client

    def hook(request: Any) -> None:
        if request.url.path.endswith("/chat/completions"):
            calls.append(json.loads(request.content))
    http.event_hooks["request"].append(hook)
    return calls


def bare(base_url: str, calls: list[dict[str, Any]], threads: int) -> tuple[float, float]:
    """The recorded bodies posted straight to the server on ``threads`` threads: (wall s, p50 s)."""
    http = httpx.Client(base_url=base_url, timeout=600)
    lat: list[float] = []

    def one(body: dict[str, Any]) -> None:
        t = time.perf_counter()
        http.post("/chat/completions", json=body).raise_for_status()
        lat.append(time.perf_counter() - t)

    started = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, calls))
    return time.perf_counter() - started, statistics.median(lat)


def measure(model: str, n_slots: int, states: list[tuple[str, str]]) -> Rate:
    """One fresh server with ``n_slots`` slots: the engine at concurrency ``n_slots``, then the bare replay."""
    with LocalServer(model, n_parallel=n_slots, prompt_cache=False) as srv:
        sdk = srv.client()
        recorded = recording(sdk)
        client = SystemOneClient(sdk, model=srv.model)
        client.prepare(ROUTING)  # the prior and the question's prompt: one-time, not what this measures
        recorded.clear()
        load0 = os.getloadavg()[0]
        result = decide_batch(client, states, ROUTING, concurrency=n_slots)
        lat = [r.latency_s for r in result.results]
        calls = list(recorded)
        bare_s, bare_p50 = bare(srv.base_url, calls, n_slots)
        return Rate(n_slots, result.totals.answered, result.totals.wall_s, len(calls), statistics.median(lat) * 1000,
                    len(calls), bare_s, bare_p50 * 1000, (load0, os.getloadavg()[0]))


def table(rates: list[Rate], model: str) -> str:
    out = [f"model {model}, {os.cpu_count()} CPUs, one routing choice per ticket, concurrency = slots", "",
           "| slots | decisions/s | calls/decision | p50 | bare calls/s | bare p50 | engine / bare | load avg |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rates:
        ratio = r.per_s * r.engine_calls / r.decisions / r.bare_per_s if r.bare_per_s and r.decisions else 0.0
        out.append(f"| {r.slots} | {r.per_s:.2f} | {r.engine_calls / max(r.decisions, 1):.2f} | {r.engine_p50_ms:.0f} ms"
                   f" | {r.bare_per_s:.2f} | {r.bare_p50_ms:.0f} ms | {ratio:.2f}x | {r.load[0]:.1f} → {r.load[1]:.1f} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=24, help="tickets per slot count")
    p.add_argument("--slots", default="1,2,4")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args()
    states = [(r["id"], r["text"]) for r in labelled(args.n)]
    rates = [measure(args.model, int(n), states) for n in args.slots.split(",")]
    print(table(rates, args.model))
    print(f"\nload average at the end (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) | {"per_s": r.per_s, "bare_per_s": r.bare_per_s}
                                               for r in rates], indent=1))


if __name__ == "__main__":
    main()
