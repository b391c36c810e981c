"""CPU per decision: what the Python in front of a fast backend costs, against its peers, in one run.

A GPU server answers a one-token decision in milliseconds, so at scale the client's own CPU is what
runs out first. The stub backend runs in another process (its CPU is not ours); each contender makes
``--n`` calls after a warm-up, and the figure is this process's CPU time (all threads) per call.

    python bench/cpu.py               # 400 calls each (the rows taking turns, 4 rounds), one and eight questions
                                      # (each row's mean, its best round and the spread; the ratios of both;
                                      # the process's voluntary / involuntary context switches a call)
    python bench/cpu.py --profile     # and where the engine's time goes (cProfile, top 15)
    python bench/cpu.py --pin         # this process alone on one core, the stub on another (bench/processes.py)
"""

from __future__ import annotations

import argparse
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
    per call added to it (all threads: ``getrusage(RUSAGE_SELF)``; issue 33 counts them)."""
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
    """The issue-33 ratios of one set of figures (the mean of the rounds, or each row's best round)."""
    post, one = figures["httpx.Client.post, JSON parsed"], figures["SystemOneClient.system_one, 1 question"]
    eight = figures["SystemOneClient.system_one, 8 questions"]
    lean, lean8 = figures["system_one, 1 question, direct post"], figures["system_one, 8 questions, direct post"]
    return (f"  {how}: one question / httpx post {one / post:.2f}x (issue 33 target <= 1.5x); eight questions / "
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


if __name__ == "__main__":
    main()
