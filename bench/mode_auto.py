"""mode="auto" on the embedded model: which answers escalate to System 2, and what each pass costs.

    python bench/mode_auto.py [--model qwen2.5-coder-0.5b|smollm2-135m] [--n 20] [--threshold 0.7]

Over a fixed set of labelled items (bench/data/routing.jsonl and spam.jsonl), it prints the share of
questions escalated, provider calls per question, the mean latency of each pass, and the accuracy
of System 1 alone, mode auto and System 2 alone on the same items.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jev_shared import Choice, Noul, SystemOneClient  # noqa: E402
from jev_shared.local import DEMO_MODEL, LocalServer  # noqa: E402

DATA = ROOT / "bench" / "data"
QUESTIONS = {
    "routing": Choice(instructions="Which team should handle this support ticket?", criteria={
        "billing": "payments, charges, refunds, invoices",
        "technical": "bugs, crashes, errors, things not working",
        "account": "login, password, profile, account settings",
        "shipping": "deliveries, parcels, tracking, returns",
    }),
    "spam": Noul(instructions="This message is spam or a scam."),
}


def load(name: str, n: int) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()[:n]]


def correct(qid: str, answer, label) -> bool:
    return answer.choice == label if qid == "routing" else (answer.noul >= 0.5) == bool(label)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=DEMO_MODEL)
    parser.add_argument("--n", type=int, default=20, help="items per question type")
    parser.add_argument("--threshold", type=float, default=0.7)
    args = parser.parse_args()
    with LocalServer(model=args.model) as srv:
        common = dict(model=srv.model, api="chat_completions", labels="names", n_retry_malformed=2)
        s1 = SystemOneClient(srv.client(), **common)
        auto = SystemOneClient(srv.client(), mode="auto", auto_threshold=args.threshold, **common)
        s2 = SystemOneClient(srv.client(), mode="system2", **common)
        rows = []
        for qid in QUESTIONS:
            for item in load(qid, args.n):
                q = {qid: QUESTIONS[qid]}
                start = time.perf_counter()
                first = s1.system_one(item["text"], q)
                s1_ms = (time.perf_counter() - start) * 1000
                start = time.perf_counter()
                resp = auto.system_one(item["text"], q)
                auto_ms = (time.perf_counter() - start) * 1000
                escalated = resp.debug["escalations"][qid]["escalated"]
                start = time.perf_counter()
                second = s2.system_one(item["text"], q)
                s2_ms = (time.perf_counter() - start) * 1000
                rows.append({"q": qid, "escalated": escalated, "calls": resp.usage.n_calls, "s1_ms": s1_ms,
                             "auto_ms": auto_ms, "s2_ms": s2_ms,
                             "s2_ok": correct(qid, second.answers[qid], item["label"]), "s1_ok": correct(qid, first.answers[qid], item["label"]),
                             "auto_ok": correct(qid, resp.answers[qid], item["label"])})
    esc = [r for r in rows if r["escalated"]]
    print(f"model {args.model}, threshold {args.threshold}, {len(rows)} questions ({args.n} per type)")
    print(f"  escalated to System 2     {len(esc)}/{len(rows)} ({len(esc) / len(rows):.0%})")
    print(f"  provider calls / question {statistics.mean(r['calls'] for r in rows):.2f}")
    print(f"  System 1 pass, mean       {statistics.mean(r['s1_ms'] for r in rows):.0f} ms")
    print(f"  System 2 pass, mean       {statistics.mean(r['s2_ms'] for r in rows):.0f} ms")
    if esc:
        print(f"  escalated answer, mean    {statistics.mean(r['auto_ms'] for r in esc):.0f} ms (System 1 + System 2)")
    for qid in QUESTIONS:
        sub = [r for r in rows if r["q"] == qid]
        print(f"  {qid:<8} accuracy: System 1 {sum(r['s1_ok'] for r in sub) / len(sub):.0%}, "
              f"auto {sum(r['auto_ok'] for r in sub) / len(sub):.0%}, "
              f"System 2 {sum(r['s2_ok'] for r in sub) / len(sub):.0%}, "
              f"escalated {sum(r['escalated'] for r in sub)}/{len(sub)}")


if __name__ == "__main__":
    main()
