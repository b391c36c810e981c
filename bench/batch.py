"""Batch decisions per second on the embedded model: sequential, the batch API at 1/2/4/8, the gateway.

One llama.cpp server (``LocalServer``, SmolLM2 unless ``--model``), one routing choice question per
ticket (so one one-token request per decision), the project's labelled tickets (bench/batch_data.py):

1. the sequential baseline: a plain ``for`` loop of ``client.system_one`` (no batch API);
2. ``decide_batch`` at concurrency 1, 2, 4, 8 against the server's slot count (``/props``);
3. the server's own one-token throughput: the very requests the engine sent in (1), replayed raw
   with ``chat.completions.create`` on ``slots`` threads, no engine; each row's ratio is to this;
4. the same job through the gateway: ``jev serve`` in front of the same server, the engine's own
   ``api="systemone"`` client, the batch API at concurrency 4 and 8.

    python -m bench batch [--n 48] [--model smollm2-135m] [--levels 1,2,4,8]

Figures, not assertions: the machine is shared; the load average is printed with the table.

``python -m bench batch_resume`` (``batch.py resume``): 1,000 labelled rows through ``jev decide`` on the embedded
model,
killed (SIGKILL) half-way, resumed, and counted: no item decided twice, none lost.

    python -m bench batch_resume [--n 1000] [--kill-at 500] [--model smollm2-135m] [--dir /tmp/jev-resume]

It runs the real command twice as a subprocess (the embedded server starts inside it), with the
progress bar on; the last progress line of each run is printed with the figures.

``python -m bench slots_throughput`` (``batch.py slots``): decisions per second on the embedded server with 1, 2 and 4
parallel slots, beside bare calls of the same prompts.

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
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from batch_data import ROUTING, labelled, write_csv, write_questions  # noqa: E402

from jev_shared import SystemOneClient  # noqa: E402
from jev_shared.backend import Backend  # noqa: E402
from jev_shared.batch import decide_batch  # noqa: E402
from jev_shared.local import DEFAULT_MODEL, LocalServer  # noqa: E402


@dataclass
class Row:
    name: str
    concurrency: int
    items: int
    failed: int
    wall_s: float
    p50_ms: float
    load: float

    @property
    def per_s(self) -> float:
        return self.items / self.wall_s if self.wall_s else 0.0


class Recorder:
    """An openai client stand-in that records each ``chat.completions.create`` the engine makes."""

    def __init__(self, real: Any) -> None:
        self.real, self.calls = real, []
        self.chat = self
        self.completions = self

    def create(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.real.chat.completions.create(**kwargs)


def slots(srv: LocalServer) -> int:
    """The server's own slot count (llama.cpp ``/props``), else what it was started with."""
    try:
        with urllib.request.urlopen(srv.base_url.removesuffix("/v1") + "/props", timeout=5) as r:
            return int(json.load(r).get("total_slots") or srv.n_parallel)
    except (OSError, ValueError):
        return srv.n_parallel


def sequential(client: Any, states: list[tuple[str, str]]) -> Row:
    lat, failed = [], 0
    load, started = os.getloadavg()[0], time.perf_counter()
    for _, state in states:
        t = time.perf_counter()
        try:
            client.system_one(state, ROUTING)
        except Exception:  # noqa: BLE001 - a bench counts failures, it does not stop on them
            failed += 1
        lat.append(time.perf_counter() - t)
    wall = time.perf_counter() - started
    return Row("sequential loop (no batch API)", 1, len(states) - failed, failed, wall,
               statistics.median(lat) * 1000, max(load, os.getloadavg()[0]))


def batched(name: str, client: Any, states: list[tuple[str, str]], concurrency: int) -> Row:
    load = os.getloadavg()[0]
    result = decide_batch(client, states, ROUTING, concurrency=concurrency)
    lat = [r.latency_s for r in result.results]
    return Row(name, concurrency, result.totals.answered, sum(result.totals.failed.values()),
               result.totals.wall_s, statistics.median(lat) * 1000, max(load, os.getloadavg()[0]))


def raw_one_token(base_url: str, calls: list[dict[str, Any]], threads: int) -> Row:
    """The recorded requests replayed straight at the server: its own one-token throughput."""
    http = openai.OpenAI(base_url=base_url, api_key="local", max_retries=0)
    lat: list[float] = []

    def one(kw: dict[str, Any]) -> None:
        t = time.perf_counter()
        http.chat.completions.create(**kw)
        lat.append(time.perf_counter() - t)

    load, started = os.getloadavg()[0], time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(one, calls))
    wall = time.perf_counter() - started
    return Row("raw one-token calls (server throughput)", threads, len(calls), 0, wall,
               statistics.median(lat) * 1000, max(load, os.getloadavg()[0]))


def through_gateway(srv: LocalServer, states: list[tuple[str, str]], levels: list[int]) -> list[Row]:
    from gateway import KEY, Gateway

    rows = []
    with Gateway((srv.base_url, srv.model)) as gw:
        client = SystemOneClient(openai.OpenAI(base_url=gw.url + "/v1", api_key=KEY), model=srv.model,
                                 api="systemone")
        decide_batch(client, states[:2], ROUTING)  # warm: the gateway builds its engine client
        for c in levels:
            rows.append(batched("batch API through jev serve", client, states, c))
    return rows


def table(rows: list[Row], raw: Row, n_slots: int, model: str) -> str:
    out = [f"model {model}, {n_slots} server slots, {os.cpu_count()} CPUs, one choice question per item "
           "(one one-token request per decision)", "",
           "| run | concurrency | decisions | failed | decisions/s | p50 per decision | vs server one-token | load avg |",
           "|---|---|---|---|---|---|---|---|"]
    for r in [*rows, raw]:
        ratio = r.per_s / raw.per_s if raw.per_s else 0.0
        out.append(f"| {r.name} | {r.concurrency} | {r.items} | {r.failed} | {r.per_s:.2f} | {r.p50_ms:.0f} ms | "
                   f"{ratio:.2f}x | {r.load:.2f} |")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=48, help="tickets per row")
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--levels", default="1,2,4,8")
    p.add_argument("--gateway-levels", default="4,8")
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    states = [(r["id"], r["text"]) for r in labelled(args.n)]
    with LocalServer(args.model) as srv:
        n_slots = slots(srv)
        rec = Recorder(openai.OpenAI(base_url=srv.base_url, api_key="local", max_retries=0))
        seq_client = SystemOneClient(rec, model=srv.model, api="chat_completions")
        seq_client.system_one(states[0][1], ROUTING)  # warm the server and the engine's memory
        rec.calls.clear()
        rows = [sequential(seq_client, states)]
        client = SystemOneClient(srv.client(), model=srv.model, api="chat_completions")
        rows += [batched("batch API (decide_batch)", client, states, c) for c in levels]
        raw = raw_one_token(srv.base_url, rec.calls, n_slots)
        rows += through_gateway(srv, states, [int(x) for x in args.gateway_levels.split(",")])
    print(table(rows, raw, n_slots, srv.model))
    print(f"\nload average at the end (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps({"model": srv.model, "slots": n_slots, "rows": [
            {**r.__dict__, "decisions_per_s": r.per_s} for r in [*rows, raw]]}, indent=1))


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def last_progress(stderr: str) -> str:
    bars = [s for s in stderr.replace("\r", "\n").splitlines() if "item/s" in s]
    return bars[-1].strip() if bars else "(no progress line)"


def main_resume() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--kill-at", type=int, default=500)
    p.add_argument("--model", default=None, help="the embedded model (default: LocalServer()'s)")
    p.add_argument("--dir", default="/tmp/jev-resume")
    args = p.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    out = d / "answers.jsonl"
    out.unlink(missing_ok=True)
    rows = write_csv(d / "tickets.csv", args.n)
    cmd = [sys.executable, "-m", "jev_shared.cli", "decide", "--input", str(d / "tickets.csv"), "--column", "text",
           "--questions", str(write_questions(d / "questions.json")), "--output", str(out),
           *(["--model", args.model] if args.model else [])]
    started = time.monotonic()
    with open(d / "run1.err", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        while proc.poll() is None and (out.read_bytes().count(b"\n") if out.exists() else 0) < args.kill_at:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    before = lines(out)
    killed_after = time.monotonic() - started
    second = subprocess.run(cmd, capture_output=True, text=True)
    after = lines(out)
    ids = Counter(r["id"] for r in after)
    want = {r["id"] for r in rows}
    labels = {r["id"]: r["label"] for r in rows}
    right = sum(1 for r in after if r["answers"] and r["answers"]["team"]["choice"] == labels[r["id"]])
    summary = json.loads(second.stdout) if second.stdout.strip() else {}
    print(f"run 1: killed with SIGKILL after {killed_after:.0f} s, {len(before)} lines in the log; "
          f"progress: {last_progress((d / 'run1.err').read_text())}")
    print(f"run 2 (exit {second.returncode}): skipped {summary.get('skipped')}, decided "
          f"{summary.get('run', {}).get('answered')}; progress: {last_progress(second.stderr)}")
    print(f"after resume: {len(after)} lines, {len(ids)} distinct ids, duplicates {sum(v - 1 for v in ids.values())}, "
          f"lost {len(want - set(ids))}, failed {sum(1 for r in after if r['error'])}; "
          f"routing accuracy {right / max(1, len(after)):.1%} (labels in the CSV)")
    print(second.stderr.strip().splitlines()[-3] if second.stderr.strip() else "")


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
    """One fresh server with ``n_slots`` slots: every slot warmed with the question's prompt (not timed), then the
    engine at concurrency ``n_slots`` and the bare replay of its requests, twice in turn (engine, bare, bare,
    engine), each figure the sum of its two passes."""
    with LocalServer(model, n_parallel=n_slots, prompt_cache=False) as srv:
        sdk = srv.client()
        recorded = recording(sdk)
        client = SystemOneClient(sdk, model=srv.model)
        client.prepare(ROUTING)  # the prior and the question's prompt: one-time, not what this measures
        decide_batch(client, states[:n_slots], ROUTING, concurrency=n_slots)  # each slot reads the question once
        recorded.clear()
        load0 = os.getloadavg()[0]
        first = decide_batch(client, states, ROUTING, concurrency=n_slots)
        calls = list(recorded)
        bare1, bare_p50 = bare(srv.base_url, calls, n_slots)
        bare2, _ = bare(srv.base_url, calls, n_slots)
        second = decide_batch(client, states, ROUTING, concurrency=n_slots)
        lat = [r.latency_s for r in first.results + second.results]
        return Rate(n_slots, first.totals.answered + second.totals.answered, first.totals.wall_s + second.totals.wall_s,
                    2 * len(calls), statistics.median(lat) * 1000, 2 * len(calls), bare1 + bare2, bare_p50 * 1000,
                    (load0, os.getloadavg()[0]))


def slots_table(rates: list[Rate], model: str) -> str:
    out = [f"model {model}, {os.cpu_count()} CPUs, one routing choice per ticket, concurrency = slots", "",
           "| slots | decisions/s | calls/decision | p50 | bare calls/s | bare p50 | engine / bare | load avg |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rates:
        ratio = r.per_s * r.engine_calls / r.decisions / r.bare_per_s if r.bare_per_s and r.decisions else 0.0
        out.append(f"| {r.slots} | {r.per_s:.2f} | {r.engine_calls / max(r.decisions, 1):.2f} | {r.engine_p50_ms:.0f} ms"
                   f" | {r.bare_per_s:.2f} | {r.bare_p50_ms:.0f} ms | {ratio:.2f}x | {r.load[0]:.1f} → {r.load[1]:.1f} |")
    return "\n".join(out)


def main_slots() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=24, help="tickets per slot count")
    p.add_argument("--slots", default="1,2,4")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--json", help="also write the rows as JSON here")
    args = p.parse_args()
    states = [(r["id"], r["text"]) for r in labelled(args.n)]
    rates = [measure(args.model, int(n), states) for n in args.slots.split(",")]
    print(slots_table(rates, args.model))
    print(f"\nload average at the end (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) | {"per_s": r.per_s, "bare_per_s": r.bare_per_s}
                                               for r in rates], indent=1))


SUBCOMMANDS = {"resume": main_resume, "slots": main_slots}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        SUBCOMMANDS[sys.argv.pop(1)]()
    else:
        main()
