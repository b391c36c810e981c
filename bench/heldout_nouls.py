"""A noul's answer words, tried on one model, and every noul run judged leave-one-dataset-out (issue 32, H2).

Runs (``--variant``): ``base`` asks as the engine does (``yes`` / ``no``); ``truefalse`` answers with the
words ``true`` / ``false`` (the words LangChain's bool is written in; options ``true: The statement is
true.`` / ``false: …``), an engine change tried by patching ``labels.named_format`` in this process only.
Each item's answer, the whole prior (``debias=True``, so the saved prior is not yet raised to a strength) and
the raw readout are saved (uncalibrated: ``raw`` is the exact readout), as ``bench/heldout_variants.py`` does.

``--lodo FILE…``: the saved runs pooled (``heldout_nouls``/``heldout.py`` zero-shot noul rows with ``raw`` and
the whole ``prior``; a later file's item replaces an earlier one's): right answers per set at each debias
strength, and each set judged by the strength chosen on the other sets (never on itself).

    JEV_NO_CACHE=1 nice -n 5 python bench/heldout_nouls.py --variant truefalse --model qwen2.5-coder-1.5b \
        --sets clickbait,subj,cr,sms_spam,sst2,rte --limit 30 --out bench/heldout_runs/h2-truefalse-15.json.gz
    python bench/heldout_nouls.py --lodo bench/heldout_runs/h2-base-05.json.gz
    python bench/heldout_nouls.py --lodo-words bench/heldout_runs/h2-base-05.json.gz bench/heldout_runs/h2-truefalse-05.json.gz
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from heldout import load_items, load_sets  # noqa: E402

TRUE_FALSE = {"true": "The statement is true.", "false": "The statement is false."}
_ALPHA_RUN = re.compile(r"[A-Za-z]+")
STRENGTHS = tuple(i / 10 for i in range(11))
NOUL_SETS = ("clickbait", "subj", "cr", "sms_spam", "sst2", "rte")
#: This project's own noul questions (``bench/quality.py``'s), read from ``bench/data/``: not public sets, so
#: never in a LODO pool; a change must not lower them.
PROJECT = {"sentiment": "The customer review is positive.",
           "spam": "The message is spam: unsolicited advertising, a scam or phishing."}


def true_false_fold(token: str) -> str | None:
    """``True``, `` true``, ``TRUE.`` → ``true``; ``false`` likewise; anything else → None."""
    run_ = _ALPHA_RUN.search(token)
    word = run_.group(0).lower() if run_ else ""
    return word if word in ("true", "false") else None


def answer_true_false() -> None:
    """A noul answers ``true`` / ``false`` (patches ``labels.named_format``, which ``style_for`` looks up)."""
    from jev_shared import labels
    from jev_shared.prompt import AnswerFormat

    plain = labels.named_format

    def named_format(prep: Any) -> tuple[AnswerFormat, labels.Fold]:
        if prep.kind != "noul":
            return plain(prep)
        return AnswerFormat(symbols=("true", "false")), true_false_fold

    labels.named_format = named_format  # type: ignore[assignment]


def items_of(name: str, limit: int) -> list[dict[str, Any]]:
    if name not in PROJECT:
        return load_items(name, limit)
    lines = (Path(__file__).resolve().parent / "data" / f"{name}.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines if line.strip()][:limit]
    return [dict(r, label="true" if r["label"] else "false") for r in rows]


def run(client: Any, name: str, meta: dict[str, Any], criteria: dict[str, str] | None, limit: int) -> list[dict[str, Any]]:
    """One set's first ``limit`` items, one decision each, as ``heldout_variants.run`` saves them."""
    from heldout_variants import answered_row

    from jev_shared import Noul

    q = Noul(instructions=meta["instructions"], criteria=criteria)
    return [answered_row(name, it, client.system_one(it["text"], {"q": q}), str) for it in items_of(name, limit)]


def at_strength(row: dict[str, Any], strength: float) -> str:
    """The answer had the raw readout been divided by the prior at ``strength``, as ``priors.powered`` and
    ``readout.divide_prior`` do (the prior floored at 1e-3, raised, then floored at 0.3 / options)."""
    from jev_shared.readout import PRIOR_FLOOR, PRIOR_SHARE

    raw, prior = row["raw"], row["prior"]
    floor = max(PRIOR_FLOOR, PRIOR_SHARE / len(prior))
    scaled = {k: p / (max(max(r, PRIOR_FLOOR) ** strength, floor) if strength else 1.0)
              for (k, p), r in zip(raw.items(), prior)}
    return max(scaled, key=scaled.__getitem__)


def load_rows(path: Path) -> list[dict[str, Any]]:
    data = json.loads((gzip.open(path) if path.suffix == ".gz" else path.open()).read())
    rows = data.get("rows") or data.get("decisions") or []
    return [r for r in rows if (r["set"] in NOUL_SETS or r["set"] in PROJECT) and r.get("shots", 0) == 0 and r.get("raw") and r.get("prior")]


def lodo(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Right per set and strength, and each set at the strength chosen on the other public sets (ties: the
    shipped 0.5); the project's own sets are judged, never chosen on."""
    sets = list(dict.fromkeys(r["set"] for r in rows))
    right = {s: {n: sum(at_strength(r, s) == r["label"] for r in rows if r["set"] == n) for n in sets} for s in STRENGTHS}
    held = {}
    for n in sets:
        rest = [m for m in sets if m != n and m not in PROJECT]
        best = max(STRENGTHS, key=lambda s: (sum(right[s][m] for m in rest), s == 0.5))
        held[n] = (best, right[best][n])
    items = {n: sum(r["set"] == n for r in rows) for n in sets}
    yes = {n: sum(max(r["raw"], key=r["raw"].__getitem__) == "true" for r in rows if r["set"] == n) for n in sets}
    return {"right": right, "held": held, "items": items, "raw_true": yes}


def print_lodo(paths: Sequence[Path]) -> None:
    pooled = {(r["set"], r["item"]): r for path in paths for r in load_rows(path)}
    res = lodo(list(pooled.values()))
    print(f"## {', '.join(p.name for p in paths)}: items {res['items']}; raw answers 'true' {res['raw_true']}")
    for s, by_set in res["right"].items():
        print(f"strength {s:.2f}: " + ", ".join(f"{n} {k}" for n, k in by_set.items()) + f"; pooled {sum(by_set.values())}")
    print("held out: " + ", ".join(f"{n} {k} (at {s:.2f})" for n, (s, k) in res["held"].items())
          + f"; pooled {sum(k for _, k in res['held'].values())}")


def print_lodo_words(paths: Sequence[Path]) -> None:
    """Each run a way of asking (its answer words): the way and strength chosen together on the other public sets."""
    runs = {path.name: load_rows(path) for path in paths}
    sets = list(dict.fromkeys(r["set"] for rows in runs.values() for r in rows if r["set"] in NOUL_SETS))
    right = {(name, s): {n: sum(at_strength(r, s) == r["label"] for r in rows if r["set"] == n) for n in sets}
             for name, rows in runs.items() for s in STRENGTHS}
    total = 0
    for n in sets:
        rest = [m for m in sets if m != n]
        best = max(right, key=lambda k: sum(right[k][m] for m in rest))
        total += right[best][n]
        print(f"leave {n} out: {best[0]} at {best[1]:.1f}, {n} {right[best][n]}")
    print(f"held out, pooled: {total} of {sum(sum(r['set'] == n for r in rows) for n in sets for rows in runs.values()) // len(runs)}")


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared import SystemOneClient
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=("base", "truefalse"))
    ap.add_argument("--lodo", type=Path, nargs="*")
    ap.add_argument("--lodo-words", type=Path, nargs="*", help="runs of one model with different answer words")
    ap.add_argument("--sets", default=",".join((*NOUL_SETS, *PROJECT)))
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.lodo or args.lodo_words:
        print_lodo(args.lodo) if args.lodo else print_lodo_words(args.lodo_words)
        return 0
    if not (args.variant and args.out):
        ap.error("--variant and --out are required to run")
    sets = load_sets()
    if args.variant == "truefalse":
        answer_true_false()
    out: dict[str, Any] = {"variant": args.variant, "calibrated": False, "model": args.model,
                           "load_at_start": os.getloadavg()[0], "started": time.strftime("%H:%M:%S", time.gmtime()),
                           "rows": []}
    srv = LocalServer(args.model, n_parallel=1).start()
    try:
        for name in args.sets.split(","):
            client = SystemOneClient(srv.client(), model=srv.model, debias=True, calibrator=None)  # the whole prior saved
            t = time.perf_counter()
            meta = {"instructions": PROJECT[name]} if name in PROJECT else sets[name]
            rows = run(client, name, meta, TRUE_FALSE if args.variant == "truefalse" else None, args.limit)
            out["rows"] += rows
            out["load_now"] = os.getloadavg()[0]
            right = sum(r["answer"] == r["label"] for r in rows)
            print(f"{name} {args.variant}: {right}/{len(rows)} {time.perf_counter() - t:.0f} s, load {out['load_now']:.1f}",
                  file=sys.stderr)
            args.out.write_bytes(gzip.compress(json.dumps(out).encode()))
    finally:
        srv.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
