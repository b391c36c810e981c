"""One served engine (vLLM or SGLang), exact readout against the window: decisions/s, accuracy, ECE.

``bench/gpu_check.sh`` starts the servers and runs this once per engine; it is no use without one. Every
labelled item of ``bench/quality.py``'s four questions (``--quick``: every 5th) is decided with
``max_concurrency`` requests in flight, once with the labels' own token ids read (``api="vllm"`` /
``"sglang"``: vLLM's ``logprob_token_ids``, SGLang's ``logit_bias`` read) and once on the top-20 window of
the same server (``api="chat_completions"``), names as
labels, no examples, no calibration. The last column is one 64-option question's read: whether every
option's own tokens came back (the surface's exact field honoured) or how many options the window left out.
One line per readout, as a markdown table row::

    python -m bench gpu_compare --api vllm --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen2.5-Coder-1.5B-Instruct
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

from jev_shared import Choice, JevError, SystemOneClient  # noqa: E402
from jev_shared.calibration import Record, metrics  # noqa: E402
from jev_shared.served import SERVED  # noqa: E402

HEADER = ("| engine | readout | decisions/s | accuracy | ECE | p50 ms | exact reads | errors | 64 options |\n"
          "|---|---|---|---|---|---|---|---|---|")
#: A question no top-20 window holds: 64 plain words as options.
WIDE = Choice(instructions="Which word is named in the text?", criteria={w: f"the word {w}" for w in (
    "apple banana cherry grape lemon mango melon orange peach pear plum berry carrot onion potato tomato "
    "garlic pepper bread butter cheese cream honey milk rice salt sugar water coffee juice soup pasta "
    "chair table couch lamp shelf mirror carpet curtain window door roof wall floor stairs garden fence "
    "river mountain forest desert island ocean valley cloud storm snow rain wind stone silver gold copper"
).split()})


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


def wide_read(client: SystemOneClient) -> str:
    """One 64-option decision: "exact" when every option's tokens came back, else how many the window missed."""
    try:
        resp = client.system_one("The text names the word garden.", {"w": WIDE})
    except JevError as exc:
        return f"error: {type(exc).__name__}"
    readout = resp.debug["questions"]["w"]["readout"]
    missing = len(readout.get("labels_missing") or [])
    return "exact" if str(readout.get("source", "")).startswith("logprobs:exact") else f"window, {missing} missing"


def row(engine: str, readout: str, out: list[Any], wall: float, wide: str) -> str:
    ok = [(q, it, r) for q, it, r in out if not isinstance(r, Exception)]
    records = [Record(answer_probs(r.answers[q]), label_key(QUESTIONS[q], it.label), q) for q, it, r in ok]
    m = metrics(records)
    exact = sum(1 for q, _, r in ok if str(r.debug["questions"][q]["readout"].get("source", "")).startswith("logprobs:exact"))
    p50 = statistics.median(r.usage.latency_ms for _, _, r in ok) if ok else float("nan")
    acc = m.accuracy * len(ok) / len(out) if out else float("nan")  # an error counts as a miss
    return (f"| {engine} | {readout} | {len(out) / wall:.1f} | {acc:.3f} | {m.ece:.3f} | {p50:.0f} | "
            f"{exact}/{len(ok)} | {len(out) - len(ok)} | {wide} |")


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
        api = args.api if readout == "exact" else "chat_completions"  # the same server, on the plain window
        client = SystemOneClient(sdk, model=args.model, api=api, calibrator=None, debias=False, debug=True,
                                 max_concurrency=args.concurrency, timeout=120)
        client.system_one("warm-up", dict(QUESTIONS))  # the one-time costs (tokenizer, discovery) before the clock
        out, wall = decide_all(client, items, args.concurrency)
        print(row(args.api, readout, out, wall, wide_read(client)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
