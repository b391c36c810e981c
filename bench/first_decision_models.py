"""What a new user waits for on each embedded model: a fresh process starts the server and makes the README
engine block's first decision, then a second one (issue 32: which model is the default).

Each model runs in a process of its own, with a fresh memory file and a fresh kept-prompts folder, so nothing
is warm but the assembled model file (in the cache) and the OS's page cache. Rows: the server's start (model
load), the first decision (the README's two questions, with debias's content-free calls where the model has
debias on), the second decision on another ticket (warm), and the whole process's wall time. ``--zero-shot``
asks the README's block as it is now (no examples); without it, bench/first_decision.py's one example per option.

    python bench/first_decision_models.py                       # both Qwen models, the default first
    python bench/first_decision_models.py --models qwen2.5-coder-0.5b --runs 3 --zero-shot
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from first_decision import STATE, questions  # noqa: E402

SECOND = "The app crashes every time I open the settings screen."


def zero_shot() -> dict[str, Any]:
    from jev_shared import Choice, Noul

    team = Choice(instructions="Which team should handle this ticket?",
                  criteria={"billing": "Payments, charges and refunds", "technical": "Bugs, crashes and errors"})
    return {"team": team, "spam": Noul(instructions="This message is spam.")}


def child(model: str, folder: Path, shots: bool) -> dict[str, Any]:
    from jev_shared import SystemOneClient
    from jev_shared.local import LocalServer

    asked = questions() if shots else zero_shot()

    t0 = time.perf_counter()
    srv = LocalServer(model, prompt_cache=folder / "slots").start()
    started = time.perf_counter()
    try:
        client = SystemOneClient(srv.client(), model=srv.model)
        first = client.system_one(STATE, asked)
        t1 = time.perf_counter()
        second = client.system_one(SECOND, asked)
        t2 = time.perf_counter()
    finally:
        srv.stop()
    return {"model": model, "examples": shots, "start_s": round(started - t0, 2), "first_s": round(t1 - started, 2),
            "first_calls": first.usage.n_calls, "second_s": round(t2 - t1, 2),
            "answers": [first.answers["team"].choice, second.answers["team"].choice]}


def main() -> None:
    from jev_shared.local import DEFAULT_MODEL, QWEN25_CODER_05B, QWEN25_CODER_15B

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    others = [m for m in (QWEN25_CODER_15B.name, QWEN25_CODER_05B.name) if m != DEFAULT_MODEL]
    ap.add_argument("--models", default=",".join([DEFAULT_MODEL, *others]))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--zero-shot", action="store_true")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, Path(os.environ["JEV_BENCH_DIR"]), not args.zero_shot)))
        return
    for run in range(args.runs):
        for model in args.models.split(","):
            with tempfile.TemporaryDirectory() as d:
                env = {**os.environ, "JEV_MEMORY_FILE": str(Path(d) / "memory.json"), "JEV_BENCH_DIR": d}
                env.pop("JEV_NO_CACHE", None)
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                flags = ["--zero-shot"] if args.zero_shot else []
                out = subprocess.run([sys.executable, __file__, "--child", model, *flags], env=env, check=True,
                                     capture_output=True, text=True, cwd=ROOT).stdout
                row = json.loads(out.strip().splitlines()[-1])
                row["process_s"] = round(time.perf_counter() - t0, 2)
                row["load_before"], row["load_after"] = round(load, 2), round(os.getloadavg()[0], 2)
                print(json.dumps({"run": run + 1, **row}), flush=True)


if __name__ == "__main__":
    main()
