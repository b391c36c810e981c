"""The sync client's eight-question call, A/B in one process (issue 33, H6): CPU, context switches, wall time.

Each row is one way to drive the eight questions' requests; the rows take turns (``--rounds``) so a change in
the machine's load falls on all alike. Per row: CPU ms per call (this process, all threads), the voluntary and
involuntary context switches per call (``getrusage``: load-insensitive), and the wall time of one eight-question
call against a stub that answers after ``--slow-ms`` (it must stay about one round trip, not eight).

    python bench/drive_ab.py                      # the rows below, 240 calls each in 4 rounds
    python bench/drive_ab.py --rows before,after  # some of them (the prefix before the colon)
    python bench/drive_ab.py --rows before,after --instructions 40   # instructions a call (valgrind cachegrind)
    DRIVE_BEFORE=<commit> python bench/drive_ab.py  # "before" is drive.py at that commit (default 27c87b2)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import resource
import subprocess
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

STUB = """
import sys, time
sys.path.insert(0, {root!r})
from bench.stub_server import StubServer
with StubServer(latency_s={latency}) as url:
    print(url, flush=True)
    time.sleep(3600)
"""


def stub(latency_s: float) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-c", STUB.format(root=str(ROOT), latency=latency_s)],
                            stdout=subprocess.PIPE, text=True)
    return proc, proc.stdout.readline().strip()  # type: ignore[union-attr]


def args_rev() -> str:
    return os.environ.get("DRIVE_BEFORE", "27c87b2")


def driver_at(rev: str) -> Any:
    """``jev_shared.drive`` as it was at ``rev`` (a git commit, or a file's path), loaded beside this tree's: the
    A/B's "before"."""
    source = Path(rev).read_text() if Path(rev).is_file() else subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{rev}:src/jev_shared/drive.py"], check=True, capture_output=True,
        text=True).stdout
    module = types.ModuleType("jev_shared.drive_before")
    module.__package__ = "jev_shared"
    exec(compile(source, f"drive.py@{rev}", "exec"), module.__dict__)  # noqa: S102 - our own file, at a commit
    return module.run_flows


def rows(base_url: str) -> dict[str, Callable[[], Any]]:
    """Row name -> one eight-question (or one-question) call against ``base_url``."""
    import openai

    from jev_shared import AsyncSystemOneClient, Choice, Memory, SystemOneClient, drive
    from jev_shared.backend import Backend, attach
    from jev_shared.direct import sdk_client

    def sync_client() -> Any:
        own, target = sdk_client(openai.OpenAI, openai.DefaultHttpxClient, base_url, "k")
        return SystemOneClient(attach(own, Backend(http=target)), model="stub", api="chat_completions",
                               memory=Memory(), labels="letters")

    team = Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs", "sales": "deals"})
    one, eight = {"team": team}, {f"q{i}": team for i in range(8)}
    state = "I was charged twice."
    before, after = driver_at(args_rev()), drive.run_flows

    def on(runner: Any, fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            drive.run_flows = runner
            return fn()
        return call

    c, d = sync_client(), sync_client()
    out: dict[str, Callable[[], Any]] = {
        "1 question": on(after, lambda: d.system_one(state, one)),
        "before: 8 questions, the driver at " + args_rev(): on(before, lambda: c.system_one(state, eight)),
        "after: 8 questions, this tree's driver": on(after, lambda: d.system_one(state, eight)),
        "serial: 8, max_concurrency=1": on(after, lambda: d.system_one(state, eight, max_concurrency=1)),
        "mc4before: 8, max_concurrency=4": on(before, lambda: c.system_one(state, eight, max_concurrency=4)),
        "mc4after: 8, max_concurrency=4": on(after, lambda: d.system_one(state, eight, max_concurrency=4)),
    }
    own, target = sdk_client(openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient, base_url, "k")
    ac = AsyncSystemOneClient(attach(own, Backend(http=target)), model="stub", api="chat_completions",
                              memory=Memory(), labels="letters")
    loop = asyncio.new_event_loop()
    out["async: 8, a loop on the caller's thread"] = lambda: loop.run_until_complete(ac.system_one(state, eight))
    return out


SLOW_TRIES = [0]


def count_slow_tries() -> None:
    """Count the pace's tries that met a slow reply (one at a time -> parallel), this tree's driver's."""
    from jev_shared import drive

    slow = drive.Pace.slow

    def counted(pace: Any) -> None:
        SLOW_TRIES[0] += 1
        slow(pace)

    drive.Pace.slow = counted  # type: ignore[method-assign]


def measure(fn: Callable[[], Any], n: int, acc: list[float]) -> None:
    before, start, wall = resource.getrusage(resource.RUSAGE_SELF), time.process_time(), time.perf_counter()
    for _ in range(n):
        fn()
    acc[0] += time.process_time() - start
    acc[4] += time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_SELF)
    acc[1] += after.ru_nvcsw - before.ru_nvcsw
    acc[2] += after.ru_nivcsw - before.ru_nivcsw
    acc[3] += n


def child(url: str, row: str, calls: int) -> None:
    """What one cachegrind run executes: 30 warm-up calls of ``row``, then ``calls`` more."""
    fn = next(fn for name, fn in rows(url).items() if name.split(":")[0] == row)
    for _ in range(30 + calls):
        fn()


def instructions(url: str, names: list[str], calls: int) -> None:
    """Instructions per call of each row (valgrind cachegrind, a run of ``calls`` calls less a run of none):
    load-free, all threads, the HTTP client's included."""
    for name in names:
        counts = []
        for n in (0, calls):
            cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                   sys.executable, __file__, "--child", name.split(":")[0], "--calls", str(n), "--url", url]
            err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
            counts.append(int(re.search(r"I\s+refs:\s+([\d,]+)", err).group(1).replace(",", "")))  # type: ignore[union-attr]
        print(f"  {name:42s}  {(counts[1] - counts[0]) / calls / 1e6:7.2f} M instructions a call", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=240)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--slow-ms", type=float, default=20.0)
    ap.add_argument("--rows", default="", help="comma-separated row prefixes (before the colon); all by default")
    ap.add_argument("--instructions", type=int, default=0, metavar="CALLS",
                    help="instead: instructions per call of each row (cachegrind, CALLS calls less none)")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    ap.add_argument("--calls", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--url", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args.url, args.child, args.calls)
    fast, fast_url = stub(0.0)
    slow, slow_url = stub(args.slow_ms / 1000)
    try:
        fns, slow_fns = rows(fast_url), rows(slow_url)
        wanted = [w for w in args.rows.split(",") if w]
        names = [k for k in fns if not wanted or k.split(":")[0] in wanted or k == "1 question"]
        if args.instructions:
            print(f"load average {os.getloadavg()[0]:.2f} (instructions do not depend on it)")
            return instructions(fast_url, names, args.instructions)
        acc = {k: [0.0, 0.0, 0.0, 0, 0.0] for k in names}
        for k in names:  # warm-up
            for _ in range(30):
                fns[k]()
        load0 = os.getloadavg()[0]
        count_slow_tries()
        for _ in range(args.rounds):
            for k in names:
                measure(fns[k], max(1, args.n // args.rounds), acc[k])
        walls = {}
        for k in names:
            for _ in range(3):
                slow_fns[k]()
            ts = []
            for _ in range(10):
                t = time.perf_counter()
                slow_fns[k]()
                ts.append((time.perf_counter() - t) * 1000)
            walls[k] = sorted(ts)[len(ts) // 2]
        one = acc["1 question"][0] / acc["1 question"][3] * 1000
        print(f"load average {load0:.2f} -> {os.getloadavg()[0]:.2f}; {args.n} calls a row in {args.rounds} rounds")
        print(f"  {'row':42s}  CPU ms/call  /8 one-q  vol. inv. switches/call  wall (fast)  wall vs {args.slow_ms:g} ms stub (median)")
        for k in names:
            cpu, vol, inv, n, wall = acc[k]
            ms = cpu / n * 1000
            ratio = ms / (8 * one) if k != "1 question" else 1.0
            print(f"  {k:42s}  {ms:8.2f}   {ratio:6.2f}x   {vol / n:6.1f} {inv / n:5.1f}   {wall / n * 1000:6.2f} ms  {walls[k]:8.1f} ms")
        print(f"  one-at-a-time tries that met a slow reply (all rows, the fast stub): {SLOW_TRIES[0]}")
    finally:
        fast.kill()
        slow.kill()


if __name__ == "__main__":
    main()
