"""Reranking bench: no rerank, LlamaIndex's LLMRerank and JevRerank on the same first-stage candidates.

    python -m bench rerank                      # embedded Qwen2.5-Coder-0.5B, 30 queries x 10 candidates
    python -m bench rerank --model smollm2 --limit 5     # a quick look
    python -m bench rerank --mode list --mode score      # JevRerank's modes to run (default: list)

The set (bench/data/rerank.json, built by ``python -m bench rerank_data``; source and licence in
bench/data/README.md) holds SQuAD 2.0 questions, each with BM25's ten best paragraphs of five
Wikipedia articles. Every contender gets the same ten nodes, in BM25 order with BM25's score, and
keeps five (``top_n=5``). Calls and tokens are read off the wire (one counting HTTP transport under
both), so they are counted alike; ``computed`` is the prompt tokens the server evaluated, the rest
being served from its prompt cache. A reranker that raises is scored on the first-stage order for
that query, and counted under ``failed``. Each JevRerank row also gives, at no extra call, the order
of the model's relevance alone (``retrieval_weight=0``), read off the same answers.

``python -m bench rerank_tune`` (``rerank.py tune``): choose JevRerank's ``retrieval_weight`` on the tuning split,
never on the bench's queries.

    python -m bench rerank_tune                    # list mode on bench/data/rerank_tune.json, Qwen 0.5B
    python -m bench rerank_tune --mode noul --mode score --readings tune.json

The tuning split (``python -m bench rerank_data``) holds 30 SQuAD 2.0 questions on the same five articles as
the bench but on other paragraphs: no query and no relevant paragraph is shared with
bench/data/rerank.json. Each node's relevance is read once per mode (``retrieval_weight=0``, so
``jev_relevance`` is the model's alone) and kept in ``--readings``; every weight is then scored
offline on those readings, with the blend JevRerank itself uses (:func:`jev_llamaindex.rerank_modes.blend`).

``python -m bench rerank_data`` (``rerank.py data``): build bench/data/rerank.json, the reranking set: SQuAD 2.0
questions, BM25's top 10 paragraphs each.

Run once from a copy of SQuAD 2.0's dev file (or the five-article excerpt named in
bench/data/README.md): ``python -m bench rerank_data dev-v2.0.json``. It also writes the tuning
split, bench/data/rerank_tune.json: the same articles' *next* paragraphs (the first answerable
question of each paragraph after the ones the bench took, six per article again), so no query and no
relevant paragraph of the bench is in it. JevRerank's ``retrieval_weight`` was chosen on that
split (``python -m bench rerank_tune``), never on the bench's queries. The result is committed, so
the bench needs no download. Every contender reranks the same first stage: the ten paragraphs of the
five articles that BM25 scores highest for the question. The paragraph the question was written on is
relevant (2); another paragraph that holds one of its answers verbatim is partly relevant (1).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import statistics
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from routers import buffered  # noqa: E402  (bench/ is on the path of a script run from it)

DATA = ROOT / "bench" / "data" / "rerank.json"
MODELS = {"qwen": "qwen2.5-coder-0.5b", "qwen15": "qwen2.5-coder-1.5b", "smollm2": "smollm2-135m"}
TOP_N = 5
#: LLMRerank's reply is "Doc: 3, Relevance: 7" lines, ten at most: 200 tokens hold them and cut a reply that runs on.
GEN_CAP = 200


class Meter(httpx.BaseTransport):
    """Counts calls and the usage every response reports (thread-safe: JevRerank calls concurrently)."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.lock = threading.Lock()
        self.calls = self.prompt = self.completion = self.computed = 0

    def snapshot(self) -> tuple[int, int, int, int]:
        with self.lock:
            return self.calls, self.prompt, self.completion, self.computed

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body, resp = buffered(self.inner, request)
        try:
            data = json.loads(body)
        except ValueError:
            data = {}
        usage = (data.get("usage") or {}) if isinstance(data, dict) else {}
        timings = (data.get("timings") or {}) if isinstance(data, dict) else {}
        with self.lock:
            self.calls += 1
            self.prompt += int(usage.get("prompt_tokens") or 0)
            self.completion += int(usage.get("completion_tokens") or 0)
            self.computed += int(timings.get("prompt_n", usage.get("prompt_tokens") or 0))
        return resp


def ndcg_at(ranked: list[str], relevant: dict[str, int], k: int = 5) -> float:
    """nDCG@k with graded gains 2^rel − 1 over the list the pipeline gets (fewer than k count as misses)."""
    dcg = sum((2 ** relevant.get(pid, 0) - 1) / math.log2(i + 2) for i, pid in enumerate(ranked[:k]))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def contenders(srv: Any, meter: Meter, modes: list[str], concurrency: int | None,
               weight: float) -> dict[str, Any]:
    """Each contender: nodes, query -> ranked nodes. Both rerankers talk to the same server through ``meter``."""
    import openai
    from llama_index.core.postprocessor import LLMRerank
    from llama_index.llms.openai_like import OpenAILike

    from jev_llamaindex import JevRerank

    llm = OpenAILike(model=srv.model, api_base=srv.base_url, api_key="local", is_chat_model=True,
                     max_tokens=GEN_CAP, temperature=0.0, http_client=httpx.Client(transport=meter, timeout=300))
    llm_rerank = LLMRerank(llm=llm, top_n=TOP_N, choice_batch_size=10)
    client = openai.OpenAI(base_url=srv.base_url, api_key="local", http_client=httpx.Client(transport=meter, timeout=300))
    out: dict[str, Any] = {"none": lambda nodes, query_str: nodes[:TOP_N], "LLMRerank": llm_rerank.postprocess_nodes}
    for mode in modes:  # every node back (top_n=10: no call changes), so that the model-only order can be read too
        jev = JevRerank.from_defaults(client, model=srv.model, top_n=10, mode=mode, max_concurrency=concurrency,
                                      retrieval_weight=weight)
        out[f"JevRerank ({mode}, w={weight})"] = jev.postprocess_nodes
    return out


def model_only(ranked: list[Any]) -> list[Any]:
    """The same nodes sorted by the model's relevance alone (ties: retrieval order), as ``retrieval_weight=0``."""
    return sorted(ranked, key=lambda n: (-n.node.metadata.get("jev_relevance", 0.0), n.node.metadata["retrieval_rank"]))


def run(model_key: str, limit: int | None, modes: list[str], concurrency: int | None,
        only: list[str] | None = None, weight: float = 0.5) -> dict[str, Any]:
    from llama_index.core.schema import NodeWithScore, TextNode

    from jev_shared.local import LocalServer

    data = json.loads(DATA.read_text())
    queries = data["queries"][:limit]
    passages = data["passages"]
    meter = Meter()
    info: dict[str, Any] = {"model": MODELS[model_key], "queries": len(queries), "top_n": TOP_N,
                            "jev_max_concurrency": concurrency, "jev_retrieval_weight": weight,
                            "loadavg_start": [round(x, 2) for x in os.getloadavg()], "cpus": os.cpu_count(),
                            "platform": platform.platform(), "results": {}}
    print(f"{info['model']}: {len(queries)} queries x 10 candidates; load {info['loadavg_start']}", flush=True)
    with LocalServer(MODELS[model_key]) as srv:
        rankers = contenders(srv, meter, modes, concurrency, weight)
        rankers = {k: v for k, v in rankers.items() if not only or k.split(" ")[0] in only or k in only}
        warm = [NodeWithScore(node=TextNode(text=passages[p], id_=p), score=s) for p, s in queries[0]["candidates"]]
        for rank in rankers.values():  # first calls pay one-time costs (label checks, the server's warm-up)
            rank(warm[:3], query_str=queries[0]["query"])
        rows: dict[str, list[dict[str, Any]]] = {}
        for i, q in enumerate(queries):  # contenders take turns on each query, so a change in load hits all alike
            for name, rank in rankers.items():
                for row_name, row in one_query(name, rank, meter, q, passages).items():
                    rows.setdefault(row_name, []).append(row)
            print(f"  query {i + 1}/{len(queries)} (load {os.getloadavg()[0]:.1f}): " + ", ".join(
                f"{name} {got[-1]['ndcg5']:.2f} in {got[-1]['seconds']:.1f} s" for name, got in rows.items()),
                flush=True)
    print("| reranker | nDCG@5 | hit@1 | tokens sent / query (output) | prompt tokens computed / query | "
          "calls / query | p50 / query | load (mean 1-min) | nodes kept | failed |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, got in rows.items():
        info["results"][name] = summary(got)
        print(line(name, info["results"][name]), flush=True)
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    return info


def one_query(name: str, rank: Any, meter: Meter, q: dict[str, Any], passages: dict[str, str]) -> dict[str, Any]:
    """One contender on one query: its list (and for JevRerank the model-only list), scored, with its cost."""
    from llama_index.core.schema import NodeWithScore, TextNode

    nodes = [NodeWithScore(node=TextNode(text=passages[p], id_=p), score=s) for p, s in q["candidates"]]
    before, t0, failed, got = meter.snapshot(), time.perf_counter(), "", nodes[:TOP_N]
    try:
        got = rank(nodes, query_str=q["query"])
    except Exception as exc:  # noqa: BLE001 - a contender's failure is a result here
        failed = f"{type(exc).__name__}: {exc}"[:200]
    seconds, after, load = time.perf_counter() - t0, meter.snapshot(), os.getloadavg()[0]
    cost = {"seconds": seconds, "calls": after[0] - before[0], "prompt": after[1] - before[1],
            "completion": after[2] - before[2], "computed": after[3] - before[3], "failed": failed, "load": load}
    lists = {name: got}
    if name.startswith("JevRerank") and not failed and "jev_relevance" in got[0].node.metadata:
        lists[name.split(", w=")[0] + ", w=0, same calls)"] = model_only(got)
    out = {}
    for row_name, ranked_nodes in lists.items():
        ranked = [n.node.node_id for n in ranked_nodes[:TOP_N]]
        out[row_name] = {"ndcg5": ndcg_at(ranked, q["relevant"]), "returned": len(ranked),
                         "hit1": bool(ranked) and q["relevant"].get(ranked[0]) == 2, **cost}
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    return {"ndcg5": sum(r["ndcg5"] for r in rows) / n, "hit1": sum(r["hit1"] for r in rows) / n,
            "tokens": sum(r["prompt"] + r["completion"] for r in rows) / n,
            "output_tokens": sum(r["completion"] for r in rows) / n, "computed": sum(r["computed"] for r in rows) / n,
            "calls": sum(r["calls"] for r in rows) / n, "p50_s": statistics.median(r["seconds"] for r in rows),
            "load": sum(r["load"] for r in rows) / n,
            "returned": sum(r["returned"] for r in rows) / n,
            "failed": sum(bool(r["failed"]) for r in rows), "errors": sorted({r["failed"] for r in rows if r["failed"]})[:3]}


def line(name: str, r: dict[str, Any]) -> str:
    return (f"| {name} | {r['ndcg5']:.3f} | {r['hit1']:.2f} | {r['tokens']:.0f} ({r['output_tokens']:.0f}) | "
            f"{r['computed']:.0f} | {r['calls']:.1f} | {r['p50_s']:.2f} s | {r['load']:.1f} | {r['returned']:.1f} | "
            f"{r['failed']} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="qwen")
    parser.add_argument("--limit", type=int, default=None, help="the first N queries only")
    parser.add_argument("--mode", choices=["list", "score", "noul"], action="append", help="JevRerank's mode "
                        "(repeat for several; default: list)")
    parser.add_argument("--weight", type=float, default=None, help="JevRerank's retrieval_weight (default: its own)")
    parser.add_argument("--concurrency", type=int, default=2, help="JevRerank's max_concurrency (default 2: "
                        "the server caches the query's prefix once per slot a request lands on)")
    parser.add_argument("--only", action="append", help="run only these contenders (none, LLMRerank, JevRerank)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args()
    from jev_llamaindex.rerank import DEFAULT_RETRIEVAL_WEIGHT

    weight = DEFAULT_RETRIEVAL_WEIGHT if args.weight is None else args.weight
    info = run(args.model, args.limit, args.mode or ["list"], args.concurrency, args.only, weight)
    print(f"load average {info['loadavg_start']} -> {info['loadavg_end']} on {info['cpus']} CPUs")
    if args.out:
        args.out.write_text(json.dumps(info, indent=1) + "\n")


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


def main_tune() -> None:
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


OUT = Path(__file__).resolve().parent / "data" / "rerank.json"
TUNE_OUT = OUT.with_name("rerank_tune.json")
PER_ARTICLE = 6
N_CANDIDATES = 10


def words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


class BM25:
    """Okapi BM25 (k1 = 1.2, b = 0.75) over a small corpus: the usual first stage of a RAG pipeline."""

    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.tfs = [Counter(words(d)) for d in docs]
        self.lens = [sum(tf.values()) for tf in self.tfs]
        self.avg = sum(self.lens) / len(self.lens)
        df = Counter(w for tf in self.tfs for w in tf)
        n = len(docs)
        self.idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
        self.k1, self.b = k1, b

    def scores(self, query: str) -> list[float]:
        out = []
        for tf, length in zip(self.tfs, self.lens):
            s = 0.0
            for w in set(words(query)):
                if w in tf:
                    f = tf[w]
                    s += self.idf[w] * f * (self.k1 + 1) / (f + self.k1 * (1 - self.b + self.b * length / self.avg))
            out.append(s)
        return out


def build(squad: dict[str, Any], split: str = "bench") -> dict[str, Any]:
    """The bench's queries (``split="bench"``), or the tuning split's: the paragraphs after the bench's."""
    articles = squad["data"][:5]
    paragraphs = [para["context"] for article in articles for para in article["paragraphs"]]
    bm25 = BM25(paragraphs)
    queries, used, skipped, start = [], set(), 0, 0
    for article in articles:
        taken, seen = 0, 0  # seen: paragraphs the bench took (or passed over) before its quota filled
        for offset, para in enumerate(article["paragraphs"]):
            gold = start + offset
            # the first answerable question of each paragraph, until the article has given PER_ARTICLE
            qa = next((q for q in para["qas"] if not q.get("is_impossible")), None)
            if split == "tune" and seen < PER_ARTICLE:  # the bench's own paragraphs: not for tuning
                seen += qa is not None and _in_top(bm25, qa["question"], start + offset, len(paragraphs))
                continue
            if qa is None or taken >= PER_ARTICLE:
                continue
            scores = bm25.scores(qa["question"])
            top = sorted(range(len(paragraphs)), key=lambda i: (-scores[i], i))[:N_CANDIDATES]
            if gold not in top:  # no reranker can lift what the first stage missed
                skipped += 1
                continue
            answers = sorted({a["text"] for a in qa["answers"]})
            relevant = {f"p{i}": 2 if i == gold else 1 for i in top
                        if i == gold or any(a in paragraphs[i] for a in answers)}
            queries.append({"id": qa["id"], "query": qa["question"], "answers": answers,
                            "candidates": [[f"p{i}", round(scores[i], 3)] for i in top], "relevant": relevant})
            used.update(top)
            taken += 1
        start += len(article["paragraphs"])
    print(f"skipped {skipped} questions whose paragraph BM25 left out of its top {N_CANDIDATES}")
    return {"source": "SQuAD 2.0 dev, first five articles (CC BY-SA 4.0); see bench/data/README.md",
            "split": split,
            "first_stage": f"BM25 (k1 1.2, b 0.75) over the {len(paragraphs)} paragraphs, top {N_CANDIDATES}; "
                           "a question whose paragraph is not in it is left out",
            "passages": {f"p{i}": paragraphs[i] for i in sorted(used)}, "queries": queries}


def _in_top(bm25: BM25, question: str, gold: int, n: int) -> bool:
    scores = bm25.scores(question)
    return gold in sorted(range(n), key=lambda i: (-scores[i], i))[:N_CANDIDATES]


def main_data() -> None:
    squad = json.loads(Path(sys.argv[1]).read_text())
    TUNE_OUT.write_text(json.dumps(build(squad, "tune"), indent=1, ensure_ascii=False) + "\n")
    data = build(squad)
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    found = sum(any(r == 2 for r in q["relevant"].values()) for q in data["queries"])
    at1 = sum(data["queries"][i]["relevant"].get(q["candidates"][0][0]) == 2 for i, q in enumerate(data["queries"]))
    print(f"{len(data['queries'])} queries, {len(data['passages'])} passages; gold in top {N_CANDIDATES}: {found}; "
          f"gold at rank 1: {at1}; wrote {OUT}")


SUBCOMMANDS = {"tune": main_tune, "data": main_data}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in SUBCOMMANDS:
        raise SystemExit(SUBCOMMANDS[sys.argv.pop(1)]())
    raise SystemExit(main())
