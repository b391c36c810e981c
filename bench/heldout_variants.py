"""Ways of asking the held-out sets' nouls and scores, tried on one model (issue 32, "Nouls and scores on the 1.5B").

The product defaults (``debias="auto"``: the model's own strength per kind; calibration as shipped), one
decision at a time, each item's answer, the prior it was divided by and the raw readout saved, so any
strength can be applied offline. Variants (what a user could write; no engine change):

- ``levelnames``: a score asked as a choice whose options are its level names (``negative`` … ``positive``),
  read back onto the levels: what a score answered by its level words instead of digits would read;
- ``nouldesc``: a noul whose options say the statement is true / false *of the state*;
- ``base``: as ``bench/heldout.py`` asks them.

    JEV_NO_CACHE=1 nice -n 5 python bench/heldout_variants.py --variant levelnames --sets finphrasebank,sst5,sick \
        --out bench/heldout_runs/h1-levelnames-15.json
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

from heldout import answered_probs, load_items, load_sets, undivided  # noqa: E402

from jev_shared import Choice, Noul, Score, SystemOneClient  # noqa: E402

NOUL_OF_THE_STATE = {"true": "Yes, the statement is true of the state.",
                     "false": "No, the statement is false of the state."}


def question(meta: dict[str, Any], variant: str) -> Choice | Score | Noul:
    """The set's question as ``variant`` asks it."""
    if meta["kind"] == "score":
        if variant == "levelnames":
            return Choice(instructions=meta["instructions"], criteria={c: c for c in meta["criteria"]})
        return Score(instructions=meta["instructions"], criteria=meta["criteria"])
    if meta["kind"] == "noul":
        return Noul(instructions=meta["instructions"], criteria=NOUL_OF_THE_STATE if variant == "nouldesc" else None)
    return Choice(instructions=meta["instructions"], criteria=meta["criteria"])


def level_of(meta: dict[str, Any], answer: str) -> str:
    """A level name read back onto its level (``"negative"`` → ``"0"``); any other answer as it is."""
    names = meta.get("criteria")
    return str(names.index(answer)) if meta["kind"] == "score" and isinstance(names, list) and answer in names else answer


def run(client: SystemOneClient, name: str, meta: dict[str, Any], variant: str, limit: int) -> list[dict[str, Any]]:
    q, rows = question(meta, variant), []
    for it in load_items(name, limit):
        resp = client.system_one(it["text"], {"q": q})
        prior = ((resp.debug or {}).get("priors") or {}).get("q")
        probs = answered_probs(resp.answers["q"])
        plist = list(prior.values()) if prior else None
        rows.append({"set": name, "item": it["id"], "label": it["label"], "answered": probs, "prior": plist,
                     "raw": undivided(probs, plist) if plist else probs,
                     "answer": level_of(meta, max(probs, key=probs.__getitem__)), "ms": resp.usage.latency_ms})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=("base", "levelnames", "nouldesc"), required=True)
    ap.add_argument("--sets", required=True)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    sets = load_sets()
    out: dict[str, Any] = {"variant": args.variant, "model": args.model, "load_at_start": os.getloadavg()[0], "rows": []}
    srv = LocalServer(args.model, n_parallel=1).start()
    try:
        for name in args.sets.split(","):
            client = SystemOneClient(srv.client(), model=srv.model, debias="auto")
            t = time.perf_counter()
            rows = run(client, name, sets[name], args.variant, args.limit)
            out["rows"] += rows
            out["load_now"] = os.getloadavg()[0]
            right = sum(r["answer"] == r["label"] for r in rows)
            print(f"{name} {args.variant}: {right}/{len(rows)} {time.perf_counter() - t:.0f} s, load {out['load_now']:.1f}",
                  file=sys.stderr)
            args.out.write_text(json.dumps(out))
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
