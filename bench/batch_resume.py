"""The batch issue's acceptance run: 1,000 labelled rows through ``jev decide`` on the embedded model,
killed (SIGKILL) half-way, resumed, and counted: no item decided twice, none lost.

    python bench/batch_resume.py [--n 1000] [--kill-at 500] [--model smollm2-135m] [--dir /tmp/jev-resume]

It runs the real command twice as a subprocess (the embedded server starts inside it), with the
progress bar on; the last progress line of each run is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from batch_data import write_csv, write_questions  # noqa: E402


def lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines()]


def last_progress(stderr: str) -> str:
    bars = [s for s in stderr.replace("\r", "\n").splitlines() if "item/s" in s]
    return bars[-1].strip() if bars else "(no progress line)"


def main() -> None:
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


if __name__ == "__main__":
    main()
