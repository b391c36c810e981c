"""One sync loop or two (issue 33, H6): a one-question call through ``drive.drive`` against the same flow through
``drive._Wave`` (what ``run_flows`` would run were the one-flow shortcut gone), with a send that answers at once.

    python bench/drive_one_loop.py                  # µs per call, the two taking turns (10 rounds)
    python bench/drive_one_loop.py --instructions   # instructions per call (valgrind cachegrind, 20000 less none)
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from jev_shared import drive  # noqa: E402
from jev_shared.calls import Budget, Call, Reply  # noqa: E402

REPLY = Reply({"ok": True}, 0.0)
CALL = Call("chat_completions", {"q": "team"})


def flow() -> Any:
    reply = yield CALL
    return reply


def send(_call: Call) -> Reply:
    return REPLY


def by_drive() -> Any:
    return [drive.drive(flow(), send)]


def by_wave() -> Any:
    outcomes: list[Any] = [None]
    drive._Wave([flow()], send, Budget(), outcomes, None).run(range(1), 8)
    return outcomes


WAYS = {"drive": by_drive, "wave": by_wave}


def timed(n: int, rounds: int) -> None:
    took: dict[str, list[float]] = {k: [] for k in WAYS}
    for _ in range(rounds):
        for name, fn in WAYS.items():
            start = time.process_time()
            for _ in range(n):
                fn()
            took[name].append((time.process_time() - start) / n * 1e6)
    for name, us in took.items():
        print(f"  {name:6s} median {sorted(us)[len(us) // 2]:6.2f} µs a call (CPU; rounds {min(us):.2f}-{max(us):.2f})")


def instructions(n: int) -> None:
    for name in WAYS:
        counts = []
        for calls in (0, n):
            cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                   sys.executable, __file__, "--child", name, "--n", str(calls)]
            err = subprocess.run(cmd, capture_output=True, text=True, check=True).stderr
            counts.append(int(re.search(r"I\s+refs:\s+([\d,]+)", err).group(1).replace(",", "")))  # type: ignore[union-attr]
        print(f"  {name:6s} {(counts[1] - counts[0]) / n:9.0f} instructions a call")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--instructions", action="store_true")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        for _ in range(args.n):
            WAYS[args.child]()
    elif args.instructions:
        instructions(args.n)
    else:
        timed(args.n // args.rounds, args.rounds)


if __name__ == "__main__":
    main()
