"""Run a command and timestamp every line it prints (stdout and stderr together), then report the time
to its first line, its longest silence and its total: what a person watching the screen waits.

    python scripts/timed_lines.py bash scripts/demo.sh
    python scripts/timed_lines.py --max-first 2 --max-gap 10 bash scripts/demo.sh   # exit 1 if slower

The figures go to stderr as one line and, with --json, to stdout as one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def run(cmd: list[str], *, echo: bool = True) -> dict:
    start = time.monotonic()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0)
    stamps: list[float] = []
    buf = b""
    assert proc.stdout is not None
    while chunk := os.read(proc.stdout.fileno(), 65536):
        now = time.monotonic() - start
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            stamps.append(now)
            if echo:
                print(f"{now:7.2f}s | {line.decode(errors='replace')}", flush=True)
    if buf:
        stamps.append(time.monotonic() - start)
        if echo:
            print(f"{stamps[-1]:7.2f}s | {buf.decode(errors='replace')}", flush=True)
    rc = proc.wait()
    total = time.monotonic() - start
    points = [0.0, *stamps, total]
    gaps = [b - a for a, b in zip(points, points[1:])]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    return {"rc": rc, "lines": len(stamps), "first_line_s": round(stamps[0], 2) if stamps else None,
            "longest_gap_s": round(gaps[worst], 2), "longest_gap_ends_at_s": round(points[worst + 1], 2),
            "total_s": round(total, 2)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-first", type=float, help="fail when the first line comes later than this (s)")
    ap.add_argument("--max-gap", type=float, help="fail when the screen stays silent longer than this (s)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    ap.add_argument("--quiet", action="store_true", help="do not echo the command's lines")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    if not args.cmd:
        ap.error("give a command to run")
    figures = run(args.cmd, echo=not args.quiet)
    print(f"first line {figures['first_line_s']} s, longest gap {figures['longest_gap_s']} s "
          f"(ending at {figures['longest_gap_ends_at_s']} s), total {figures['total_s']} s, "
          f"{figures['lines']} lines, exit {figures['rc']}", file=sys.stderr)
    if args.json:
        print(json.dumps(figures))
    slow = (args.max_first is not None and (figures["first_line_s"] is None or figures["first_line_s"] > args.max_first)
            or args.max_gap is not None and figures["longest_gap_s"] > args.max_gap)
    return 1 if slow or figures["rc"] else 0


if __name__ == "__main__":
    sys.exit(main())
