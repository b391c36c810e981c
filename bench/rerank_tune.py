"""Choose JevRerank's ``retrieval_weight`` on the tuning split, never on the bench's queries.

    python bench/rerank_tune.py                    # list mode on bench/data/rerank_tune.json, Qwen 0.5B
    python bench/rerank_tune.py --mode noul --mode score --readings tune.json

The tuning split (bench/rerank_data.py) holds 30 SQuAD 2.0 questions on the same five articles as
the bench but on other paragraphs: no query and no relevant paragraph is shared with
bench/data/rerank.json. Each node's relevance is read once per mode (``retrieval_weight=0``, so
``jev_relevance`` is the model's alone) and kept in ``--readings``; every weight is then scored
offline on those readings, with the blend JevRerank itself uses (:func:`jev_llamaindex.rerank_modes.blend`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from rerank import MODELS, ndcg_at  # noqa: E402  - the bench's own metric

TUNE = ROOT / "bench" / "data" / "rerank_tune.json"
WEIGHTS = [round(0.1 * i, 1) for i in range(11)]


def read(model_key: str, modes: list[str], limit: int | None) -> dict[str, list[list[float]]]:
    """Per mode, per query, each candidate's model-only relevance (in candidate order)."""
    from llama_index.core.schema import NodeWithScore, TextNode

    from jev_llamaindex import JevRerank
    from jev_shared.local import LocalServer

    data = json.loads(TUNE.read_text())
    out: dict[str, list[list[float]]] = {}
    with LocalServer(MODELS[model_key]) as srv:
        for mode in modes:
            rerank = JevRerank.from_defaults(srv.client(), model=srv.model, top_n=10, mode=mode, retrieval_weight=0.0,
                                             max_concurrency=2, on_error="raise")
            t0, rows = time.perf_counter(), []
            for q in data["queries"][:limit]:
                nodes = [NodeWithScore(node=TextNode(text=data["passages"][p], id_=p), score=s)
                         for p, s in q["candidates"]]
                got = {n.node.node_id: n.node.metadata["jev_relevance"] for n in
                       rerank.postprocess_nodes(nodes, query_str=q["query"])}
                rows.append([got[p] for p, _ in q["candidates"]])
            out[mode] = rows
            print(f"{mode}: {len(rows)} queries in {time.perf_counter() - t0:.0f} s, load {os.getloadavg()}",
                  flush=True)
    return out


def score(rows: list[list[float]], queries: list[dict[str, Any]], weight: float) -> tuple[float, float]:
    """nDCG@5 and hit@1 of the blended order at ``weight``."""
    from jev_llamaindex.rerank_modes import blend

    ndcg = hit = 0.0
    for rel, q in zip(rows, queries):
        ids, n = [p for p, _ in q["candidates"]], len(q["candidates"])
        key = [blend(r, rank, n, weight) for rank, r in enumerate(rel)]
        ranked = [ids[i] for i in sorted(range(n), key=lambda i: (-key[i], i))]
        ndcg += ndcg_at(ranked, q["relevant"])
        hit += q["relevant"].get(ranked[0]) == 2
    return ndcg / len(rows), hit / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="qwen")
    parser.add_argument("--mode", choices=["list", "score", "noul"], action="append")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--readings", type=Path, default=None, help="read (or, when absent, write) readings here")
    args = parser.parse_args()
    queries = json.loads(TUNE.read_text())["queries"]
    readings: dict[str, list[list[float]]] = {}
    if args.readings and args.readings.exists():
        readings = json.loads(args.readings.read_text())
    todo = [m for m in (args.mode or ["list"]) if m not in readings]
    if todo:
        readings.update(read(args.model, todo, args.limit))
        if args.readings:
            args.readings.write_text(json.dumps(readings) + "\n")
    print("| mode | " + " | ".join(f"w={w}" for w in WEIGHTS) + " |")
    print("|---|" + "---|" * len(WEIGHTS))
    for mode, rows in readings.items():
        cells = [score(rows, queries[: len(rows)], w) for w in WEIGHTS]
        print(f"| {mode} ({len(rows)} q) | " + " | ".join(f"{n:.3f} / {h:.2f}" for n, h in cells) + " |")
    print("(nDCG@5 / hit@1; w = retrieval_weight: 0 the model's relevance alone, 1 the retrieval order alone)")


if __name__ == "__main__":
    main()
