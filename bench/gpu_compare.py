"""One served engine (vLLM or SGLang), exact readout against the window: decisions/s, accuracy, ECE.

``bench/gpu_check.sh`` starts the servers and runs this once per engine; it is no use without one. Every
labelled item of ``bench/quality.py``'s four questions (``--quick``: every 5th) is decided with
``max_concurrency`` requests in flight, once with the labels' own token ids read (``served.for_server``:
vLLM's ``logprob_token_ids``, SGLang's ``logit_bias`` read) and once on the plain top-20 window, names as
labels, no examples, no calibration. One line per readout, as a markdown table row::

    python bench/gpu_compare.py --api vllm --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-1.5B-Instruct
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import QUESTIONS, answer_probs, label_key, load_items  # noqa: E402

from jev_shared import JevError, SystemOneClient  # noqa: E402
from jev_shared.calibration import Record, metrics  # noqa: E402
from jev_shared.served import SERVED, for_server  # noqa: E402

HEADER = "| engine | readout | decisions/s | accuracy | ECE | p50 ms | exact reads | errors |\n|---|---|---|---|---|---|---|---|"


def decide_all(client: SystemOneClient, items: dict[str, list[Any]], concurrency: int) -> tuple[list[Any], float]:
    """Every item once, ``concurrency`` at a time: ((question, item, response or error), wall seconds)."""
    jobs = [(qid, it) for qid, rows in items.items() for it in rows]

    def one(job: tuple[str, Any]) -> tuple[str, Any, Any]:
        qid, it = job
        try:
            return qid, it, client.system_one(it.text, {qid: QUESTIONS[qid]})
        except JevError as exc:
            return qid, it, exc

    start = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        out = list(pool.map(one, jobs))
    return out, time.perf_counter() - start


def row(engine: str, readout: str, out: list[Any], wall: float) -> str:
    ok = [(q, it, r) for q, it, r in out if not isinstance(r, Exception)]
    records = [Record(answer_probs(r.answers[q]), label_key(QUESTIONS[q], it.label), q) for q, it, r in ok]
    m = metrics(records)
    exact = sum(1 for q, _, r in ok if str(r.debug["questions"][q]["readout"].get("source", "")).startswith("logprobs:exact"))
    p50 = statistics.median(r.usage.latency_ms for _, _, r in ok) if ok else float("nan")
    acc = m.accuracy * len(ok) / len(out) if out else float("nan")  # an error counts as a miss
    return (f"| {engine} | {readout} | {len(out) / wall:.1f} | {acc:.3f} | {m.ece:.3f} | {p50:.0f} | "
            f"{exact}/{len(ok)} | {len(out) - len(ok)} |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", choices=SERVED, required=True)
    ap.add_argument("--base-url", required=True, help="the server's OpenAI base URL, ending in /v1")
    ap.add_argument("--model", required=True, help="the served model's name")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="every 5th item")
    ap.add_argument("--header", action="store_true", help="print the table's header first")
    args = ap.parse_args(argv)
    items = load_items(args.quick)
    if args.header:
        print(HEADER)
    for readout in ("exact", "window"):
        sdk = openai.OpenAI(base_url=args.base_url, api_key="-", max_retries=0)
        if readout == "exact":
            for_server(sdk, args.api)
        client = SystemOneClient(sdk, model=args.model, api=args.api, calibrator=None, debias=False, debug=True,
                                 max_concurrency=args.concurrency, timeout=120)
        client.system_one("warm-up", dict(QUESTIONS))  # the one-time costs (tokenizer, discovery) before the clock
        out, wall = decide_all(client, items, args.concurrency)
        print(row(args.api, readout, out, wall), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
