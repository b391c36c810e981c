"""Option names that share a first token: read in the call that asks, by continuation calls, or by distinct words.

On the public intent sets whose names share first tokens in the model's tokenizer (banking77's ``card_…``, sgd's
``Find…``, powerplay11's ``CHANGE_…``, clinc150's ``change_…``), each item is decided by the default model on one
embedded server, once per variant, with the product's defaults: ``read-on``, the names as the engine gives them
(on the embedded server the first call writes the name out, every name's tokens biased: ``pathread.py``; a
continuation call only where its path went elsewhere); ``calls``, the same with the path read off (each shared
token read on by a continuation call); and ``distinct``, the answer words of ``first_tokens.distinct_aliases``
(each member of a group turned round until its first token is its own: one call). Per set and variant: right
answers, calls and output tokens per decision, the p50, and how many distinct probabilities the options got on
the first item (every option its own reading, or names under one token split evenly). The first decision of each
variant pays its debias prior; those calls are counted apart (prior calls to the first answer).

    python -m bench first_token_names [--sets sgd,powerplay11,banking77,clinc150] [--limit 30] [--shots 0]
                                      [--variants read-on,calls,distinct]

Figures, not assertions: the variants run in turn per set on the same server, the load average printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from heldout import examples, load_items, load_sets, question  # noqa: E402

from jev_shared import JevError, SystemOneClient, flows, methods, planning, priors  # noqa: E402
from jev_shared.first_tokens import distinct_aliases  # noqa: E402
from jev_shared.labels import token_checked_aliases  # noqa: E402
from jev_shared.local import DEFAULT_MODEL, LocalServer  # noqa: E402

VARIANTS = {"read-on": token_checked_aliases, "calls": token_checked_aliases, "distinct": distinct_aliases}
PLAN_FOR = methods.path_plan_for


def client_for(srv: LocalServer, variant: str) -> SystemOneClient:
    """A fresh engine client (its own memory: each variant pays its own prior) answering with ``variant``'s words;
    ``calls``: the read-on by continuation calls only (the path read off)."""
    from jev_shared.memory import Memory

    planning.token_checked_aliases = VARIANTS[variant]  # type: ignore[attr-defined]  # the planner's answer words
    plan_for = (lambda *a: None) if variant == "calls" else PLAN_FOR
    flows.path_plan_for = priors.path_plan_for = plan_for  # type: ignore[attr-defined]
    return SystemOneClient(srv.client(), model=srv.model, memory=Memory())


def run(srv: LocalServer, variant: str, meta: dict[str, Any], items: list[dict[str, Any]], shots: int) -> dict[str, Any]:
    client = client_for(srv, variant)
    q, shot = question(meta), (examples(meta) if shots else None)
    right = calls = out_tokens = 0
    lat: list[float] = []
    first_calls, distinct = None, None
    for it in items:
        try:
            resp = client.system_one(it["text"], {"q": q}, examples=shot)
        except JevError as exc:
            print(f"  {variant}: {it['id']}: {exc}", flush=True)
            continue
        ans = resp.answers["q"]
        if first_calls is None:  # the first answer pays the prior: counted apart
            first_calls = resp.usage.n_calls
            distinct = len({round(p, 9) for p in ans.probabilities.values()})
            continue
        right += ans.choice == it["label"]
        calls += resp.usage.n_calls
        out_tokens += resp.usage.output_tokens or 0
        lat.append(resp.usage.latency_ms)
    n = max(len(lat), 1)
    return {"variant": variant, "right": right, "n": len(lat), "calls": calls / n, "out": out_tokens / n,
            "p50": statistics.median(lat) if lat else 0.0, "first_calls": first_calls, "distinct": distinct,
            "options": len(meta["criteria"])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sets", default="sgd,powerplay11,banking77,clinc150")
    p.add_argument("--limit", type=int, default=30, help="items a set (plus the first, which pays the prior)")
    p.add_argument("--shots", type=int, default=0, help="1: one example per option")
    p.add_argument("--model", default=DEFAULT_MODEL)
    p.add_argument("--variants", default=",".join(VARIANTS), help="which of: " + ", ".join(VARIANTS))
    args = p.parse_args()
    sets = load_sets()
    print("| set | options | variant | right | calls/decision | output tokens | p50 | first answer's calls | "
          "distinct probabilities | load avg |\n|---|---|---|---|---|---|---|---|---|---|", flush=True)
    with LocalServer(args.model, prompt_cache=False) as srv:
        for name in args.sets.split(","):
            meta, items = sets[name], load_items(name, args.limit + 1)
            for variant in args.variants.split(","):
                load, t = os.getloadavg()[0], time.perf_counter()
                r = run(srv, variant, meta, items, args.shots)
                print(f"| {name} | {r['options']} | {variant} | {r['right']}/{r['n']} | {r['calls']:.2f} | "
                      f"{r['out']:.2f} | {r['p50']:.0f} ms | {r['first_calls']} | {r['distinct']} | "
                      f"{load:.1f} → {os.getloadavg()[0]:.1f} ({time.perf_counter() - t:.0f} s) |", flush=True)


if __name__ == "__main__":
    main()
