"""The README example's first decision on a fresh server and a fresh cache, against the same prompts sent as
bare one-token calls (``client.preview()`` gives them) on a fresh server.

Each row runs in a process of its own with a fresh memory file and a fresh kept-prompts folder, so nothing is
warm but the model file. Wall time and the prompt tokens the server read anew (llama.cpp's ``prompt_n``), the
kept prompts' own loopback requests (``slots.py``, outside the decision's debug) counted too; a second decision in
the same process (``later``: its calls and reads, not in the ratio) shows later decisions unchanged. ``--runs N``
alternates the two rows N times (which goes first alternates too) and gives each run's ratio: on a shared
machine the ratio within one run is the figure to read. ``cpu_s``: the row process's CPU time over the same span
(the embedded llama.cpp server runs in it), what the server did whatever the load. Every row's server runs on the
same threads (``JEV_LOCAL_THREADS``, else one per core), whatever the load average at its start.

    python -m bench first_decision                 # the embedded default model (Qwen2.5-Coder-1.5B)
    python -m bench first_decision --model qwen2.5-coder-0.5b --runs 3

``python -m bench first_decision_models`` (``first_decision.py models``): what a new user waits for on each
embedded model: a fresh process starts the server and makes the README engine block's first decision, then a
second one (the wait that weighs in which model is the default).

Each model runs in a process of its own, with a fresh memory file and a fresh kept-prompts folder, so nothing
is warm but the assembled model file (in the cache) and the OS's page cache. Rows: the server's start (model
load), the first decision (the README's two questions, with debias's content-free calls where the model has
debias on), the second decision on another ticket (warm), and the whole process's wall time. ``--zero-shot``
asks the README's block as it is now (no examples); without it, bench/first_decision.py's one example per option.

    python -m bench first_decision_models                       # both Qwen models, the default first
    python -m bench first_decision_models --models qwen2.5-coder-0.5b --runs 3 --zero-shot
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


STATE = "I was charged twice, please refund."
LATER = "The app crashes every time I open settings."


def questions() -> dict[str, Any]:
    from jev_shared import Choice, Example, Noul

    team = Choice(instructions="Which team should handle this ticket?",
                  criteria={"billing": "Payments, charges and refunds", "technical": "Bugs, crashes and errors"},
                  examples=[Example(state="My card was charged the wrong amount.", answer="billing"),
                            Example(state="The app crashes when I log in.", answer="technical")])
    return {"team": team, "spam": Noul(instructions="This message is spam.")}


def child(row: str, model: str, folder: Path, concurrency: int | None = None) -> dict[str, Any]:
    from jev_shared import SystemOneClient
    from jev_shared.local import LocalServer

    with LocalServer(model, prompt_cache=folder / "slots") as srv:
        loopback = _count_loopback(srv.slots)
        client = SystemOneClient(srv.client(), model=srv.model, debug=True)
        if row == "bare":
            sdk = srv.client()
            calls = client.preview(STATE, questions())
            start, cpu = time.perf_counter(), time.process_time()
            reads: list[int] = []
            for c in calls:
                body = {k: v for k, v in c["request"].items() if k not in ("extra_body",)}
                raw = sdk.chat.completions.with_raw_response.create(**{**body, "max_tokens": 1},
                                                                    extra_body=c["request"].get("extra_body"))
                reads.append(json.loads(raw.http_response.content).get("timings", {}).get("prompt_n", 0))
            return {"row": row, "seconds": time.perf_counter() - start, "cpu_s": round(time.process_time() - cpu, 2),
                    "calls": len(calls), "prompt_read": sum(reads),
                    "reads": reads}
        start, cpu = time.perf_counter(), time.process_time()
        resp = client.system_one(STATE, questions(), **({} if concurrency is None else {"max_concurrency": concurrency}))
        took, cpu = time.perf_counter() - start, round(time.process_time() - cpu, 2)
        sent = _reads(resp)
        first = {"row": row, "seconds": took, "cpu_s": cpu, "calls": resp.usage.n_calls + len(loopback),
                 "prompt_read": sum(map(sum, sent.values())) + sum(loopback), "reads": sent, "server_ms": _ms(resp),
                 "loopback_read": list(loopback), "choice": resp.answers["team"].choice,
                 "prior": resp.debug["questions"]["spam"]["readout"].get("prior"),
                 "probs": [resp.answers["team"].probabilities, resp.answers["spam"].noul]}
        loopback.clear()
        start = time.perf_counter()  # a later decision in the same process: what it sends should not change
        later = client.system_one(LATER, questions())
        first["later"] = {"seconds": round(time.perf_counter() - start, 2), "calls": later.usage.n_calls + len(loopback),
                          "reads": _reads(later), "choice": later.answers["team"].choice}
        return first


def _questions(resp: Any) -> dict[str, Any]:
    """Each question's debug, and a choice asked in both orders its reversed reading's as ``<id> (reversed)``."""
    reversed_ = (resp.debug.get("reversed") or {}).get("questions") or {}
    return {**resp.debug["questions"], **{f"{q} (reversed)": info for q, info in reversed_.items()}}


def _ms(resp: Any) -> dict[str, list[int]]:
    """Per question, each reply's server time (prompt and generation, llama.cpp's ``timings``), in ms."""
    return {q: [round(a["data"].get("timings", {}).get("prompt_ms", 0) + a["data"].get("timings", {}).get(
        "predicted_ms", 0)) for a in info["attempts"] if a["kind"] == "response"] for q, info in _questions(resp).items()}


def _reads(resp: Any) -> dict[str, list[int]]:
    """Per question, the prompt tokens each reply had the server read anew, in the order sent."""
    return {q: [a["data"].get("timings", {}).get("prompt_n", 0) for a in info["attempts"] if a["kind"] == "response"]
            for q, info in _questions(resp).items()}


def _count_loopback(slots: Any) -> list[int]:
    """The prompt tokens of the kept prompts' own twin requests (sent past the engine, so not in its debug)."""
    counted: list[int] = []
    if slots is None:
        return counted
    post = slots._post

    def posting(path: str, body: dict[str, Any]) -> Any:
        out = post(path, body)
        if path.endswith("/chat/completions"):
            counted.append(out.get("timings", {}).get("prompt_n", 0))
        return out
    slots._post = posting
    return counted


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=None)
    ap.add_argument("--runs", type=int, default=1, help="alternate the two rows this many times")
    ap.add_argument("--child", default=None)
    ap.add_argument("--first-concurrency", type=int, default=None,
                    help="the first decision's max_concurrency (default: the client's); the later one keeps the default")
    args = ap.parse_args()
    from jev_shared.local import DEFAULT_MODEL

    model = args.model or DEFAULT_MODEL
    if args.child:
        print(json.dumps(child(args.child, model, Path(os.environ["JEV_BENCH_DIR"]), args.first_concurrency)))
        return
    print(f"load average {os.getloadavg()[0]:.2f}; model {model}")
    ratios = []
    for run in range(args.runs):
        order = ("first decision", "bare") if run % 2 == 0 else ("bare", "first decision")
        rows = {row: one_row(row, model, args.first_concurrency) for row in order}
        fd, bare = rows["first decision"], rows["bare"]
        ratios.append((fd["seconds"] / bare["seconds"], fd["prompt_read"] / bare["prompt_read"],
                       fd["cpu_s"] / max(bare["cpu_s"], 1e-9)))
        print(f"run {run + 1}: first decision / bare one-token calls: {ratios[-1][0]:.2f}x wall, {ratios[-1][1]:.2f}x "
              f"prompt tokens, {ratios[-1][2]:.2f}x CPU of the process (server in it) (target <= 1.5x)")
    walls = sorted(r[0] for r in ratios)
    cpus = sorted(r[2] for r in ratios)
    print(f"wall ratio median {walls[len(walls) // 2]:.2f}x, range {walls[0]:.2f}-{walls[-1]:.2f}x over {args.runs} "
          f"run(s); CPU ratio median {cpus[len(cpus) // 2]:.2f}x, range {cpus[0]:.2f}-{cpus[-1]:.2f}x; "
          f"load average {os.getloadavg()[0]:.2f}")


def one_row(row: str, model: str, concurrency: int | None = None) -> dict[str, Any]:
    """One row in a fresh process, with a fresh memory file and kept-prompts folder, and the same server threads as
    every other row (``JEV_LOCAL_THREADS``, else one per core up to the server's cap): the server picks fewer from the load average, so
    unpinned, a row started at a higher load ran on fewer threads than the row it is compared with."""
    from jev_shared.local.server import threads_for_machine

    threads = os.environ.get("JEV_LOCAL_THREADS") or str(threads_for_machine(load=0.0))
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "JEV_MEMORY_FILE": str(Path(d) / "memory.json"), "JEV_BENCH_DIR": d,
               "JEV_LOCAL_THREADS": threads}
        env.pop("JEV_NO_CACHE", None)  # the kept prompts are part of the first decision
        load = os.getloadavg()[0]
        more = [] if concurrency is None else ["--first-concurrency", str(concurrency)]
        out = subprocess.run([sys.executable, __file__, "--model", model, "--child", row, *more], env=env, check=True,
                             capture_output=True, text=True, cwd=ROOT).stdout
    result = json.loads(out.strip().splitlines()[-1])
    result["load"] = f"{load:.2f}-{os.getloadavg()[0]:.2f}"
    print("  ", result, flush=True)
    return result


SECOND = "The app crashes every time I open the settings screen."


def zero_shot() -> dict[str, Any]:
    from jev_shared import Choice, Noul

    team = Choice(instructions="Which team should handle this ticket?",
                  criteria={"billing": "Payments, charges and refunds", "technical": "Bugs, crashes and errors"})
    return {"team": team, "spam": Noul(instructions="This message is spam.")}


def model_child(model: str, folder: Path, shots: bool) -> dict[str, Any]:
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


def main_models() -> None:
    from jev_shared.local import DEFAULT_MODEL, QWEN25_CODER_05B, QWEN25_CODER_15B

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    others = [m for m in (QWEN25_CODER_15B.name, QWEN25_CODER_05B.name) if m != DEFAULT_MODEL]
    ap.add_argument("--models", default=",".join([DEFAULT_MODEL, *others]))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--zero-shot", action="store_true")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(model_child(args.child, Path(os.environ["JEV_BENCH_DIR"]), not args.zero_shot)))
        return
    for run in range(args.runs):
        for model in args.models.split(","):
            with tempfile.TemporaryDirectory() as d:
                env = {**os.environ, "JEV_MEMORY_FILE": str(Path(d) / "memory.json"), "JEV_BENCH_DIR": d}
                env.pop("JEV_NO_CACHE", None)
                load = os.getloadavg()[0]
                t0 = time.perf_counter()
                flags = ["--zero-shot"] if args.zero_shot else []
                out = subprocess.run([sys.executable, __file__, "models", "--child", model, *flags], env=env, check=True,
                                     capture_output=True, text=True, cwd=ROOT).stdout
                row = json.loads(out.strip().splitlines()[-1])
                row["process_s"] = round(time.perf_counter() - t0, 2)
                row["load_before"], row["load_after"] = round(load, 2), round(os.getloadavg()[0], 2)
                print(json.dumps({"run": run + 1, **row}), flush=True)


SUBCOMMANDS = {"models": main_models}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        SUBCOMMANDS[sys.argv.pop(1)]()
    else:
        main()
