"""Names that share four or more tokens: does the read-on's depth tie them (issue 32, powerplay11's ``CASH_BONUS``)?

The read-on (:mod:`jev_shared.readon`) asks at most ``CONTINUATION_DEPTH`` one-token continuation calls after
the first token; names still sharing every token read by then are split evenly, and the tie goes to the name
listed first (``CASH_BONUS`` = ``C``·``ASH``·``_B``·``ONUS`` is the whole start of ``CASH_BONUS_EXPIRY``; banking77's
``lost_or_stolen_card`` / ``lost_or_stolen_phone`` share four tokens too). This runs the product defaults
(Jev, zero-shot, the embedded model) on every item, scored and extra, whose true option shares four or more
tokens with another option, once per depth (the module constant patched; a fresh client, so the prior is
read at that depth too), and saves each answer and its calls.

    JEV_NO_CACHE=1 nice -n 5 python bench/router_depth.py --sets banking77 --depths 3,5 --out /tmp/depth.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from heldout import load_items, load_sets, question  # noqa: E402


def deep_names(names: Sequence[str], tokenize: Any, shared: int = 4) -> set[str]:
    """The names that share at least ``shared`` leading tokens with another name."""
    paths = {n: tuple(tokenize(n)) for n in names}
    out: set[str] = set()
    for a in names:
        for b in names:
            k = 0
            while a != b and k < min(len(paths[a]), len(paths[b])) and paths[a][k] == paths[b][k]:
                k += 1
            if k >= shared:
                out |= {a, b}
    return out


def run_depth(srv: Any, meta: dict[str, Any], items: Sequence[dict[str, Any]], depth: int) -> list[dict[str, Any]]:
    from jev_shared import SystemOneClient, readon

    readon.CONTINUATION_DEPTH = depth
    client = SystemOneClient(srv.client(), model=srv.model)
    q, rows = question(meta), []
    for it in items:
        t = time.perf_counter()
        resp = client.system_one(it["text"], {"q": q})
        rows.append({"depth": depth, "item": it["id"], "label": it["label"], "answer": resp.answers["q"].choice,
                     "calls": resp.usage.n_calls, "ms": round((time.perf_counter() - t) * 1000, 1)})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", default="banking77")
    ap.add_argument("--depths", default="3,5")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    sets = load_sets()
    out: dict[str, Any] = {"model": args.model, "load_at_start": os.getloadavg()[0], "engine": os.environ.get(
        "JEV_ENGINE_COMMIT", "checkout"), "started": time.strftime("%H:%M:%S", time.gmtime()), "sets": {}}
    with LocalServer(args.model, n_parallel=1) as srv:
        for name in args.sets.split(","):
            meta = sets[name]
            deep = deep_names(list(meta["criteria"]), srv.tokenize)
            items = [it for it in load_items(name, None) + load_items(name, None, extra=True) if it["label"] in deep]
            rows = [r for d in args.depths.split(",") for r in run_depth(srv, meta, items, int(d))]
            out["sets"][name] = {"deep_names": sorted(deep), "rows": rows}
            out["load_now"] = os.getloadavg()[0]
            args.out.write_text(json.dumps(out))
            for d in args.depths.split(","):
                got = [r for r in rows if r["depth"] == int(d)]
                print(f"{name} depth {d}: {sum(r['answer'] == r['label'] for r in got)}/{len(got)}, "
                      f"load {out['load_now']:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
