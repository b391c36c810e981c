"""Ways of asking the held-out sets' nouls and scores, tried on one model (issue 32, "Nouls and scores on the 1.5B").

The product defaults (``debias="auto"``: the model's own strength per kind; calibration as shipped), one
decision at a time, each item's answer, the prior it was divided by and the raw readout saved, so any
strength can be applied offline. Variants (what a user could write; no engine change):

- ``levelnames``: a score asked as a choice whose options are its level names (``negative`` … ``positive``),
  read back onto the levels: what a score answered by its level words instead of digits would read (since
  ``5d7b45a`` a 3-level score is asked so by default, ``labels.level_names``: the same requests as ``base`` there);
- ``nouldesc``: a noul whose options say the statement is true / false *of the state*;
- ``base``: as ``bench/heldout.py`` asks them;
- ``digitsmapped`` (an engine change tried, not shipped by the variant): a score asked by digits, as the
  default, with the closing line restating each digit's level (``(0, 1, 2), where 0 = negative, 1 = neutral, …``)
  next to where the model answers: whether the 1.5B's digits lose the level they stand for.

    JEV_NO_CACHE=1 nice -n 5 python bench/heldout_variants.py --variant levelnames --sets finphrasebank,sst5,sick \
        --out bench/heldout_runs/h1-levelnames-15.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
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


def map_digits_in_closing() -> None:
    """``digitsmapped``: the score's closing line names each digit's level (patches ``prompt.closing``)."""
    from jev_shared import prompt

    plain = prompt.closing

    def closing(prep: Any, fmt: Any) -> str:
        if fmt.kind != "label" or fmt.symbols is None or prep.kind != "score":
            return plain(prep, fmt)
        pairs = ", ".join(f"{s} = {d or k}" for s, k, d in zip(fmt.symbols, prep.keys, prep.descriptions))
        digits = ", ".join(fmt.symbols)
        return f"Answer with exactly one digit ({digits}), where {pairs}. Reply with that digit and nothing else."

    prompt.closing = closing  # type: ignore[assignment]
    prompt._SYSTEMS.clear()


def level_of(meta: dict[str, Any], answer: str) -> str:
    """A level name read back onto its level (``"negative"`` → ``"0"``); any other answer as it is."""
    names = meta.get("criteria")
    return str(names.index(answer)) if meta["kind"] == "score" and isinstance(names, list) and answer in names else answer


def answered_row(name: str, it: dict[str, Any], resp: Any, answer_of: Callable[[str], str]) -> dict[str, Any]:
    """One item's saved row: the answered and raw readouts, the prior, the answer (``answer_of`` the top key)."""
    prior = ((resp.debug or {}).get("priors") or {}).get("q")
    probs = answered_probs(resp.answers["q"])
    plist = list(prior.values()) if prior else None
    return {"set": name, "item": it["id"], "label": it["label"], "answered": probs, "prior": plist,
            "raw": undivided(probs, plist) if plist else probs,
            "answer": answer_of(max(probs, key=probs.__getitem__)), "ms": resp.usage.latency_ms}


def run(client: SystemOneClient, name: str, meta: dict[str, Any], variant: str, limit: int) -> list[dict[str, Any]]:
    """Each item's row, with the strength its saved prior was raised to (``debias="auto"``: the model's own)."""
    q = question(meta, variant)
    strength = asked_strength(client.model, meta, variant)
    return [{**answered_row(name, it, client.system_one(it["text"], {"q": q}), lambda a: level_of(meta, a)),
             "strength": strength} for it in load_items(name, limit)]


def asked_kind(meta: dict[str, Any], variant: str) -> str:
    """The kind the engine was asked (a score asked by its level names is asked as a choice)."""
    return "choice" if variant == "levelnames" else str(meta["kind"])


def asked_strength(model: str, meta: dict[str, Any], variant: str) -> float:
    """The power of the content-free prior ``debias="auto"`` divides by here: what the saved prior was raised to."""
    from jev_shared.models import debias_strength

    return debias_strength(model, asked_kind(meta, variant), False)


STRENGTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def whole_prior(row: dict[str, Any], saved_strength: float) -> list[float] | None:
    """The content-free prior itself: the saved one is the prior raised to the strength it was divided by
    (``priors.powered``: floored at 1e-3, then raised), so it is raised back by ``1 / saved_strength``.
    Why: ``debias="auto"`` saves the powered prior (the 1.5B's nouls: its square root); raising that again
    made this table's "whole" the model's half and its "half" a quarter."""
    prior = row["prior"]
    if not prior or saved_strength in (0.0, 1.0):
        return prior
    return [p ** (1.0 / saved_strength) for p in prior]


def saved_strength(row: dict[str, Any], model: str, variant: str) -> float:
    """The strength a row's prior was saved at: the row's own ``strength`` (runs since issue 32's H3, session
    14), else what ``debias="auto"`` divides by for this model and the kind asked (every earlier run here was
    made at today's strengths: the 1.5B's nouls at half since they have one, every other kind asked whole)."""
    if "strength" in row:
        return float(row["strength"])
    from heldout import load_sets

    return asked_strength(model, load_sets()[row["set"]], variant)


def at_strength(row: dict[str, Any], strength: float, level_names: bool = False, saved: float = 1.0) -> str:
    """The answer had the raw readout been divided by the prior at ``strength`` (as ``priors.powered`` and
    ``readout.divide_prior`` do: the prior floored at 1e-3, raised, floored at 0.3 / options); ``saved`` is
    the strength the row's prior was saved at (:func:`saved_strength`)."""
    from jev_shared.readout import PRIOR_FLOOR, PRIOR_SHARE

    raw, prior = row["raw"], whole_prior(row, saved)
    scaled = dict(raw)
    if prior and strength > 0.0:
        floor = max(PRIOR_FLOOR, PRIOR_SHARE / len(prior))
        scaled = {k: p / max(max(r, PRIOR_FLOOR) ** strength, floor) for (k, p), r in zip(raw.items(), prior)}
    best = max(scaled, key=scaled.__getitem__)
    return best if best == row["answer"] or not level_names else str(list(raw).index(best))


def strengths_table(path: Path) -> None:
    """Right answers per set and strength, pooled, and the strength chosen leaving each set out."""
    import gzip

    data = json.loads((gzip.open(path) if path.suffix == ".gz" else path.open()).read())
    rows, right = data["rows"], {}
    sets = list(dict.fromkeys(r["set"] for r in rows))
    model, variant = data.get("model") or "qwen2.5-coder-1.5b", data["variant"]
    saved = {id(r): saved_strength(r, model, variant) for r in rows}
    for s in STRENGTHS:
        right[s] = {n: sum(at_strength(r, s, variant == "levelnames", saved[id(r)]) == r["label"]
                           for r in rows if r["set"] == n) for n in sets}
        print(f"strength {s:.2f}: " + ", ".join(f"{n} {right[s][n]}" for n in sets) + f"; pooled {sum(right[s].values())}")
    for n in sets:
        rest = [m for m in sets if m != n]
        best = max(STRENGTHS, key=lambda s: (sum(right[s][m] for m in rest), s == 1.0))
        print(f"leave {n} out: strength {best:.2f} (chosen on {'+'.join(rest)}), {n} {right[best][n]}")
    print("items:", {n: sum(r["set"] == n for r in rows) for n in sets})


def main(argv: Sequence[str] | None = None) -> int:
    from jev_shared.local import LocalServer

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=("base", "levelnames", "nouldesc", "digitsmapped"))
    ap.add_argument("--strengths", type=Path, help="a saved run: right answers per debias strength, offline")
    ap.add_argument("--sets", default="")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--limit", type=int, default=30)
    ap.add_argument("--no-calibration", action="store_true",
                    help="answers left uncalibrated, so `raw` is the exact readout (a temperature keeps the top answer, "
                         "but undoing only the prior from calibrated answers leaves the temperature in)")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    if args.strengths:
        strengths_table(args.strengths)
        return 0
    if not (args.variant and args.out and args.sets):
        ap.error("--variant, --sets and --out are required to run")
    sets = load_sets()
    if args.variant == "digitsmapped":
        map_digits_in_closing()
    out: dict[str, Any] = {"variant": args.variant, "calibrated": not args.no_calibration, "model": args.model, "load_at_start": os.getloadavg()[0], "rows": [],
                           "started": time.strftime("%H:%M:%S", time.gmtime())}
    srv = LocalServer(args.model, n_parallel=1).start()
    try:
        for name in args.sets.split(","):
            client = SystemOneClient(srv.client(), model=srv.model, debias="auto",
                                     calibrator=None if args.no_calibration else "auto")
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
