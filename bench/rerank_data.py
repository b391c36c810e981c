"""Build bench/data/rerank.json, the reranking set: SQuAD 2.0 questions, BM25's top 10 paragraphs each.

Run once from a copy of SQuAD 2.0's dev file (or the five-article excerpt named in
bench/data/README.md): ``python bench/rerank_data.py dev-v2.0.json``. It also writes the tuning
split, bench/data/rerank_tune.json: the same articles' *next* paragraphs (the first answerable
question of each paragraph after the ones the bench took, six per article again), so no query and no
relevant paragraph of the bench is in it. JevRerank's ``retrieval_weight`` was chosen on that
split (bench/rerank_tune.py), never on the bench's queries. The result is committed, so
the bench needs no download. Every contender reranks the same first stage: the ten paragraphs of the
five articles that BM25 scores highest for the question. The paragraph the question was written on is
relevant (2); another paragraph that holds one of its answers verbatim is partly relevant (1).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

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


if __name__ == "__main__":
    squad = json.loads(Path(sys.argv[1]).read_text())
    TUNE_OUT.write_text(json.dumps(build(squad, "tune"), indent=1, ensure_ascii=False) + "\n")
    data = build(squad)
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    found = sum(any(r == 2 for r in q["relevant"].values()) for q in data["queries"])
    at1 = sum(data["queries"][i]["relevant"].get(q["candidates"][0][0]) == 2 for i, q in enumerate(data["queries"]))
    print(f"{len(data['queries'])} queries, {len(data['passages'])} passages; gold in top {N_CANDIDATES}: {found}; "
          f"gold at rank 1: {at1}; wrote {OUT}")
