"""Fit the calibration shipped for the embedded default model, and judge it on answers it never saw.

Superseded: the shipped file is now fitted on public sets and judged leave one dataset
out (``python -m bench heldout_fit bench/heldout_runs/qwen-*.json* --write``). This script, on the
project's own tickets, is kept for that record; pass ``--no-write`` to leave the shipped file alone.

    python -m bench quality --models qwen2.5-coder-0.5b --labels names --shots 0,4 --raw q.json --out /tmp/q.md
    python scripts/fit_calibration.py q.json            # writes src/jev_shared/calibration/fitted/qwen2.5-coder-0.5b.json

The items of each (question, true answer) alternate between a fitting half and a judging half;
one temperature and one top-label scaling (slope and shift of the top probability's logit) per
question *kind*, apart with and without examples (``*choice``, ``*choice+examples``, …: a user's
own questions are not the bench's, so per-option offsets would not carry over), is fitted on the
fitting half and judged on the other, per question and setting: accuracy, ECE before → after,
and the selective accuracy at the recommended threshold for ``--target`` precision. A part of
the fit that does not lower the judging half's ECE is dropped (the top-label scaling first, then
the temperature), so a kind is never made worse than as answered.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jev_shared.calibration import SHIPPED, Calibrator, Record, metrics, recommend_threshold  # noqa: E402

KINDS = {"routing": "choice", "urgency": "score", "sentiment": "noul", "spam": "noul"}


def split(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(fitting half, judging half): alternating within each (setting, question, true answer)."""
    seen: dict[tuple, int] = {}
    halves: tuple[list[dict], list[dict]] = ([], [])
    for r in rows:
        key = (r["shots"], r["question"], r["label"])
        seen[key] = seen.get(key, -1) + 1
        halves[seen[key] % 2].append(r)
    return halves


def record(r: dict) -> Record:
    """Keyed as the engine looks a fit up: by kind, and apart for questions asked with examples."""
    return Record(r["probabilities"], r["label"], f"*{KINDS[r['question']]}" + ("+examples" if r["shots"] else ""))


def prune(cal: Calibrator, judge_rows: list[dict]) -> None:
    """Drop what does not lower the judging half's ECE: a kind's top-label scaling, then its temperature."""
    for key in [k for k in cal.temperatures if k != "*"]:  # a part that does not help on the judging half goes
        recs = [record(r) for r in judge_rows if record(r).question_id == key]
        if not recs:
            continue
        with_top = metrics(cal.calibrate(recs)).ece
        top = cal.tops.pop(key, None)
        t_only = metrics(cal.calibrate(recs)).ece
        if top is not None and with_top <= t_only:
            cal.tops[key] = top
        elif top is not None:
            print(f"dropped {key}'s top-label scaling: held-out ECE {t_only:.3f} with T alone, {with_top:.3f} with it")
        if min(with_top, t_only) > metrics(recs).ece:
            print(f"dropped {key}: held-out ECE {metrics(recs).ece:.3f} -> {min(with_top, t_only):.3f}")
            del cal.temperatures[key]
            cal.tops.pop(key, None)
            cal.thresholds.pop(key, None)


def cross_fit(fit_rows: list[dict], judge_rows: list[dict], target: float) -> None:
    """The same fit made on each half and judged on the other, pooled: twice the judged answers,
    so a steadier ECE than one judging half (on 48 answers a perfectly calibrated model reads ~0.1).
    Every part is kept here (no pruning), so a kind the shipped file leaves as answered can read worse."""
    pooled: dict[tuple, list[tuple[Record, Record]]] = {}
    for fit, judge in ((fit_rows, judge_rows), (judge_rows, fit_rows)):
        cal = Calibrator.fit([record(r) for r in fit], min_records=10, target=target, top=True)
        for r in judge:
            pooled.setdefault((r["shots"], r["question"]), []).append((record(r), cal.calibrate([record(r)])[0]))
    print("\ncross-fitted (each half judged by a fit on the other, pooled):")
    for (k, q), pairs in sorted(pooled.items()):
        before, after = metrics([b for b, _ in pairs]), metrics([a for _, a in pairs])
        print(f"  {k}-shot {q}: n {len(pairs)}, ECE {before.ece:.3f} -> {after.ece:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+", help="bench/quality.py --raw files")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--target", type=float, default=0.95)
    ap.add_argument("--shots", default="0,4", help="the settings fitted on")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    rows = [r for p in args.raw for r in json.loads(p.read_text())["results"]
            if r["model"] == args.model and r["labels"] == "names" and not r["error"] and r["question"] in KINDS
            and "names" not in r.get("variant", "")]
    fit_rows, judge_rows = split(rows)
    shots = {int(s) for s in args.shots.split(",")}
    fitting = [record(r) for r in fit_rows if r["shots"] in shots]
    cal = Calibrator.fit(fitting, min_records=10, target=args.target, top=True)
    cal.temperatures["*"] = 1.0  # a kind nothing was fitted for is left as answered
    cal.tops.pop("*", None)
    prune(cal, judge_rows)
    kept = Calibrator(cal.temperatures, tops=cal.tops, target=args.target).evaluate(fitting)  # gates for what is kept
    cal.thresholds = {k: kept.per_question[k].threshold if k in kept.per_question else kept.overall.threshold
                      for k in cal.temperatures}
    print(f"fitted on {sum(r['shots'] in shots for r in fit_rows)} answers; judged on {len(judge_rows)} others\n")
    print("| setting | question | n | T | top (slope, shift) | accuracy | ECE before → after | threshold "
          "| selective accuracy (kept) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in sorted({r["shots"] for r in judge_rows}):
        for q in KINDS:
            recs = [record(r) for r in judge_rows if r["shots"] == k and r["question"] == q]
            if not recs:
                continue
            b, a = metrics(recs), metrics(cal.calibrate(recs))
            key = recs[0].question_id
            t = cal.threshold(key)
            sel = next((s for s in a.selective if t is not None and abs(s.threshold - t) < 1e-9), None)
            kept = f"{sel.accuracy:.0%} ({sel.coverage:.0%})" if sel and sel.accuracy is not None else "—"
            best = recommend_threshold(a, args.target)
            top = cal.tops.get(key if key in cal.temperatures else "*")
            top_cell = f"{top[0]:.2f}, {top[1]:+.2f}" if top else "—"
            print(f"| {k}-shot | {q} | {len(recs)} | {cal.temperature(key):.2f} | {top_cell} | {b.accuracy:.0%} | "
                  f"{b.ece:.3f} → {a.ece:.3f} | {t if t is not None else '—'} (here: {best}) | {kept} |")
    cross_fit(fit_rows, judge_rows, args.target)
    if not args.no_write:
        SHIPPED.mkdir(exist_ok=True)
        out = SHIPPED / f"{args.model}.json"
        cal._report = None  # the file holds the fit, not its in-sample report
        cal.save(out)
        print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
