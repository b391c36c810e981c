"""compare_routers' run: every contender routes every item on one embedded server, tallied per contender."""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from router_contenders import BUILDERS, Contender
from router_data import DATA, MODELS, N_CTX, ROUTES, WARMUP, load_items
from router_meter import Meter


@dataclass
class Outcome:
    item: str
    label: str
    answer: str | None
    latency_ms: float
    calls: int
    output_tokens: int
    error: str | None = None


@dataclass
class Tally:
    key: str
    name: str
    note: str
    outcomes: list[Outcome] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        n = len(self.outcomes)
        lat = sorted(o.latency_ms for o in self.outcomes)
        usable = [o for o in self.outcomes if o.error is None]
        errors: dict[str, int] = {}
        for o in self.outcomes:
            if o.error:
                kind = o.error.split(":", 1)[0]
                errors[kind] = errors.get(kind, 0) + 1
        return {
            "key": self.key, "name": self.name, "note": self.note, "n": n,
            "accuracy": sum(o.answer == o.label for o in self.outcomes) / n,
            "accuracy_usable": (sum(o.answer == o.label for o in usable) / len(usable)) if usable else None,
            "unusable": (n - len(usable)) / n,
            "output_tokens": statistics.fmean(o.output_tokens for o in self.outcomes),
            "output_tokens_p95": percentile(sorted(o.output_tokens for o in self.outcomes), 95),
            "calls": statistics.fmean(o.calls for o in self.outcomes),
            "p50_ms": percentile(lat, 50), "p95_ms": percentile(lat, 95), "mean_ms": statistics.fmean(lat),
            "errors": errors,
        }


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, -(-len(sorted_values) * q // 100))
    return float(sorted_values[int(rank) - 1])


def run_one(contender: Contender, meter: Meter, item: dict[str, str]) -> Outcome:
    calls0, out0 = meter.snapshot()
    error = answer = None
    start = time.perf_counter()
    try:
        answer = contender.decide(item["text"])
    except Exception as exc:  # every failure is an unusable answer, counted by kind
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    latency = (time.perf_counter() - start) * 1000.0
    calls1, out1 = meter.snapshot()
    return Outcome(item["id"], item["label"], answer, latency, calls1 - calls0, out1 - out0, error)


def machine() -> dict[str, Any]:
    cpu = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_start": list(os.getloadavg())}


def versions() -> dict[str, str]:
    out = {}
    for dist in ("jev-integrations", "openai", "langchain-core", "langchain-openai", "llama-index-core",
                 "llama-index-llms-openai-like", "jevper", "xllamacpp", "httpx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "missing"
    return out


def run(model_key: str, keys: list[str], limit: int | None, warmup: int,
        verbose: bool = False, threads: int | None = None) -> dict[str, Any]:
    from jev_shared.local import LocalServer

    items = load_items(limit)
    info = {"model": MODELS[model_key], "items": len(items), "routes": len(ROUTES), "dataset": DATA.name,
            "route_names": list(ROUTES),
            "machine": machine(), "versions": versions(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    print(f"{info['model']}: {len(items)} items, {len(ROUTES)} routes; load {info['machine']['loadavg_start']}",
          flush=True)
    with LocalServer(MODELS[model_key], n_ctx=N_CTX, n_parallel=2, n_threads=threads) as srv:
        info["server"] = {"n_threads": srv.n_threads, "n_parallel": srv.n_parallel, "n_ctx_per_slot": srv.n_ctx}
        meters = {k: Meter() for k in keys}
        contenders = {k: BUILDERS[k](srv.base_url, srv.model, meters[k]) for k in keys}
        tallies = {k: Tally(k, c.name, c.note) for k, c in contenders.items()}
        for text in WARMUP[:warmup]:  # connections, api=auto discovery
            for k in keys:
                run_one(contenders[k], meters[k], {"id": "warmup", "text": text, "label": ""})
        started = time.perf_counter()
        size = max(6, len(items) // 10)  # blocks of at least 6 items, at most 10 blocks
        for b, first in enumerate(range(0, len(items), size)):
            block = items[first:first + size]
            # each contender routes a block in a row, as a deployed router would, after one unscored
            # request that puts its prompt prefix in the server's cache; who goes first rotates
            for k in keys[b % len(keys):] + keys[: b % len(keys)]:
                run_one(contenders[k], meters[k], {"id": "prime", "text": WARMUP[-1], "label": ""})
                for item in block:
                    outcome = run_one(contenders[k], meters[k], item)
                    tallies[k].outcomes.append(outcome)
                    if verbose:
                        print(f"    {k:<12} {outcome.label:<10} -> {outcome.answer!s:<10} {outcome.latency_ms:7.0f} ms "
                              f"{outcome.calls} calls {outcome.output_tokens} tok {outcome.error or ''}", flush=True)
            print(f"  {first + len(block)}/{len(items)} items, {time.perf_counter() - started:.0f} s", flush=True)
        info["wall_s"] = time.perf_counter() - started
        info["paths"] = {k: m.paths for k, m in meters.items()}
    info["machine"]["loadavg_end"] = list(os.getloadavg())
    info["results"] = [t.summary() for t in tallies.values()]
    info["outcomes"] = {k: [asdict(o) for o in t.outcomes] for k, t in tallies.items()}
    return info
