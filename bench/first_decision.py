"""The README example's first decision on a fresh server and a fresh cache, against the same prompts sent as
bare one-token calls (``client.preview()`` gives them) on a fresh server (issue 33).

Each row runs in a process of its own with a fresh memory file and a fresh kept-prompts folder, so nothing is
warm but the model file. Wall time and the prompt tokens the server read anew (llama.cpp's ``prompt_n``).

    python bench/first_decision.py            # the embedded default model (Qwen2.5-Coder-0.5B)
    python bench/first_decision.py --model smollm2
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
STATE = "I was charged twice, please refund."


def questions() -> dict[str, Any]:
    from jev_shared import Choice, Example, Noul

    team = Choice(instructions="Which team should handle this ticket?",
                  criteria={"billing": "Payments, charges and refunds", "technical": "Bugs, crashes and errors"},
                  examples=[Example(state="My card was charged the wrong amount.", answer="billing"),
                            Example(state="The app crashes when I log in.", answer="technical")])
    return {"team": team, "spam": Noul(instructions="This message is spam.")}


def child(row: str, model: str, folder: Path) -> dict[str, Any]:
    from jev_shared import SystemOneClient
    from jev_shared.local import LocalServer

    with LocalServer(model, prompt_cache=folder / "slots") as srv:
        client = SystemOneClient(srv.client(), model=srv.model, debug=True)
        if row == "bare":
            sdk = srv.client()
            calls = client.preview(STATE, questions())
            start = time.perf_counter()
            read = 0
            for c in calls:
                body = {k: v for k, v in c["request"].items() if k not in ("extra_body",)}
                raw = sdk.chat.completions.with_raw_response.create(**{**body, "max_tokens": 1},
                                                                    extra_body=c["request"].get("extra_body"))
                read += json.loads(raw.http_response.content).get("timings", {}).get("prompt_n", 0)
            return {"row": row, "seconds": time.perf_counter() - start, "calls": len(calls), "prompt_read": read}
        start = time.perf_counter()
        resp = client.system_one(STATE, questions())
        took = time.perf_counter() - start
        read = sum(a["data"].get("timings", {}).get("prompt_n", 0) for info in resp.debug["questions"].values()
                   for a in info["attempts"] if a["kind"] == "response")
        return {"row": row, "seconds": took, "calls": resp.usage.n_calls, "prompt_read": read,
                "choice": resp.answers["team"].choice}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    from jev_shared.local import DEFAULT_MODEL

    model = args.model or DEFAULT_MODEL
    if args.child:
        print(json.dumps(child(args.child, model, Path(os.environ["JEV_BENCH_DIR"]))))
        return
    print(f"load average {os.getloadavg()[0]:.2f}; model {model}")
    rows = {}
    for row in ("first decision", "bare"):
        with tempfile.TemporaryDirectory() as d:
            env = {**os.environ, "JEV_MEMORY_FILE": str(Path(d) / "memory.json"), "JEV_BENCH_DIR": d}
            out = subprocess.run([sys.executable, __file__, "--model", model, "--child", row], env=env, check=True,
                                 capture_output=True, text=True, cwd=ROOT).stdout
            rows[row] = json.loads(out.strip().splitlines()[-1])
            print("  ", rows[row])
    ratio = rows["first decision"]["seconds"] / rows["bare"]["seconds"]
    print(f"first decision / bare one-token calls: {ratio:.2f}x wall (issue 33 target <= 1.5x); load average "
          f"{os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
