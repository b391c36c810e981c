"""Warm start: the first decision against the hundredth, on the embedded default model.

Every row runs in a fresh process (``--child``), so nothing is warm but what the row says: a fresh
memory cache file, or the file a previous process left. Rows, side by side in one run:

* the README's "engine in ten lines" (3 questions, zero-shot): first call and warm call in a fresh
  cache, then a second process on that cache (first call, provider calls);
* a 15-option choice with 15 examples (one per option): first decision and ``prepare``, with the
  priors' crossed halves (today's default) and with leave one out (the previous default), and the
  routing accuracy of each on the same items;
* a 15-option choice zero-shot: first decision and warm p50.

    python -m bench warm              # all rows (about 5 minutes on 2 CPU cores)
    python -m bench warm --items 20   # items for the 15-option accuracy rows
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data"
sys.path.insert(0, str(ROOT))

README_STATE = "I was charged twice, please refund."
#: The warm calls' states: new texts about as long as the README's (a warm call reads its state anew;
#: the state plus a suffix, as this bench used before, let the server reuse the state's own tokens).
README_LIKE = ("My parcel never arrived, please help.", "The app crashes when I log in.",
               "Please cancel my order from yesterday.", "Can I change my delivery address?",
               "Why was my card declined today?")
#: One state per distractor route of bench/routers.py, written for this bench, so 15 options each have an example.
DISTRACTOR_EXAMPLES = {
    "marketing": "Can we boost the spring campaign post on our social channels next week?",
    "sales_ops": "The CRM lost the territory assignment for my new prospects.",
    "procurement": "We need to run a tender for a new cleaning supplier.",
    "security_office": "I left my umbrella in the lobby; did security find it on CCTV?",
    "research": "The lab centrifuge needs recalibration before our next experiment.",
    "training": "How do I enrol in the project management certification course?",
    "communications": "Please publish this announcement on the intranet front page.",
    "investor_relations": "A shareholder asked when the annual report will be published.",
    "quality": "The ISO auditor found two non-conformities in our process.",
    "sustainability": "What is our carbon footprint for last quarter's reporting?",
    "events": "I'd like to book a venue for the team offsite in June.",
}


def readme_questions() -> dict[str, Any]:
    from jev_shared import Choice, Noul, Score

    return {"team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"}),
            "urgency": Score(instructions="How urgent?", criteria=["can wait", "today", "now"]),
            "spam": Noul(instructions="This is spam.")}


def fifteen() -> tuple[dict[str, Any], list[Any], list[dict[str, Any]]]:
    """(the 15-option question, one example per option, routing items whose answer is among the options)."""
    from bench.quality import QUESTIONS
    from bench.routers import DISTRACTORS
    from jev_shared import Choice, Example

    routes = dict(QUESTIONS["routing"].criteria)  # type: ignore[union-attr]
    criteria = {**routes, **{k: DISTRACTORS[k] for k in DISTRACTOR_EXAMPLES}}
    shots = [Example(state=r["text"], answer=r["label"]) for r in _jsonl("examples.jsonl") if r["question"] == "routing"]
    shots += [Example(state=text, answer=key) for key, text in DISTRACTOR_EXAMPLES.items()]
    order = list(criteria)
    shots.sort(key=lambda ex: order.index(ex.answer))
    question = {"route": Choice(instructions="Which team should handle this request?", criteria=criteria)}
    return question, shots, _jsonl("routing.jsonl")


def _jsonl(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


def child(row: str, items: int, prior_mode: str, prompts: bool) -> dict[str, Any]:
    """One row in this (fresh) process; the memory file is JEV_MEMORY_FILE, set by the parent, and the
    kept prompts (``slots``) beside it unless ``prompts`` is False."""
    from jev_shared import SystemOneClient, priors
    from jev_shared.local import LocalServer

    if prior_mode == "loo":
        priors.CROSSED_HALVES_FROM = 10**6  # the previous default, for comparison
    with LocalServer(prompt_cache=None if prompts else False) as srv:
        client = SystemOneClient(srv.client(), model=srv.model)
        if row == "readme":
            return _timed_calls(client, [README_STATE, *README_LIKE], readme_questions())
        question, shots, data = fifteen()
        if row == "fifteen-zero-shot":
            return _timed_calls(client, [item["text"] for item in data[:6]], question)
        if row == "fifteen-prepare":
            prep = client.prepare(question, examples=shots)
            first = _timed_calls(client, [data[0]["text"]], question, examples=shots)
            return {"prepare_s": prep.seconds, "prepare_calls": prep.calls, "prior_calls": prep.prior_calls,
                    "after_prepare_s": first["first_s"], "after_prepare_calls": first["first_calls"]}
        out = _timed_calls(client, [data[0]["text"]], question, examples=shots)
        right, lat = 0, []
        for item in data[:items]:
            t = time.perf_counter()
            resp = client.system_one(item["text"], question, examples=shots)
            lat.append(time.perf_counter() - t)
            right += resp.answers["route"].choice == item["label"]  # type: ignore[union-attr]
        return {**out, "accuracy": right / max(1, items), "items": items, "p50_s": statistics.median(lat)}


def _timed_calls(client: Any, states: list[str], questions: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """The first call, then a warm one for each further state (each new: a repeated state would be cached)."""
    times, calls = [], []
    n = len(states)
    for state in states:
        t = time.perf_counter()
        resp = client.system_one(state, questions, **kw)
        times.append(time.perf_counter() - t)
        calls.append(resp.usage.n_calls)
    out = {"first_s": times[0], "first_calls": calls[0]}
    if n > 1:
        out |= {"warm_p50_s": statistics.median(times[1:]), "warm_calls": calls[-1]}
    return out


#: llama.cpp threads for every row: chosen once from the load at the bench's start, so a row is not
#: given fewer because the previous row's own process still shows in the load average.
THREADS = 0


def run_child(row: str, memory: Path, items: int = 0, priors: str = "halves", prompts: bool = True) -> dict[str, Any]:
    env = {**os.environ, "JEV_MEMORY_FILE": str(memory), "JEV_LOCAL_THREADS": str(THREADS)}
    env.pop("JEV_NO_CACHE", None)
    args = [sys.executable, __file__, "--child", row, "--items", str(items), "--priors", priors,
            *([] if prompts else ["--no-prompts"])]
    out = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", default=None)
    ap.add_argument("--items", type=int, default=20)
    ap.add_argument("--priors", default="halves", choices=("halves", "loo"))
    ap.add_argument("--rows", default="readme,fifteen,zero-shot")
    ap.add_argument("--no-prompts", action="store_true", help="(child) no kept prompts: LocalServer(prompt_cache=False)")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.items, args.priors, not args.no_prompts)))
        return
    rows = args.rows.split(",")
    load = os.getloadavg()[0]
    from jev_shared.local import threads_for_machine

    global THREADS
    THREADS = int(os.environ.get("JEV_LOCAL_THREADS") or 0) or threads_for_machine()
    print(f"load average {load:.2f}, {os.cpu_count()} cores, llama.cpp threads {THREADS} in every row")
    with tempfile.TemporaryDirectory() as tmp:
        results: dict[str, Any] = {}
        if "readme" in rows:
            path = Path(tmp) / "readme.json"
            results["readme fresh cache"] = run_child("readme", path)
            results["readme second process"] = run_child("readme", path)
            bare = Path(tmp) / "bare" / "readme.json"  # the memory alone, no kept prompts (before this change)
            bare.parent.mkdir()
            run_child("readme", bare, prompts=False)
            results["readme second process, memory only"] = run_child("readme", bare, prompts=False)
        if "fifteen" in rows:
            for priors in ("halves", "loo"):
                results[f"15 options, 15 examples, {priors}"] = run_child("fifteen", Path(tmp) / f"f-{priors}.json",
                                                                          args.items, priors)
            results["15 options, 15 examples, prepare"] = run_child("fifteen-prepare", Path(tmp) / "p.json")
        if "zero-shot" in rows:
            results["15 options zero-shot"] = run_child("fifteen-zero-shot", Path(tmp) / "z.json")
    for name, row in results.items():
        print(f"{name:40s} " + "  ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()))
    print(f"load average after {os.getloadavg()[0]:.2f}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
