"""Fit the calibration shipped for the embedded default model, and judge it on answers it never saw.

    python bench/quality.py --models qwen2.5-coder-0.5b --labels names --shots 0,4 --raw q.json --out /tmp/q.md
    python scripts/fit_calibration.py q.json            # writes jev_shared/calibrations/qwen2.5-coder-0.5b.json

The items of each (question, true answer) alternate between a fitting half and a judging half;
one temperature per question *kind*, apart with and without examples (``*choice``,
``*choice+examples``, …: a user's own questions are not the bench's, so per-option offsets would not carry over) is fitted on the fitting half and
judged on the other, per question and setting: accuracy, ECE before → after, and the selective
accuracy at the recommended threshold for ``--target`` precision.
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
    cal = Calibrator.fit([record(r) for r in fit_rows if r["shots"] in shots], min_records=10, target=args.target)
    cal.temperatures["*"] = 1.0  # a kind nothing was fitted for is left as answered
    for key in [k for k in cal.temperatures if k != "*"]:  # a fit that does not help on the judging half goes
        recs = [record(r) for r in judge_rows if record(r).question_id == key]
        if recs and metrics(cal.calibrate(recs)).ece > metrics(recs).ece:
            print(f"dropped {key}: held-out ECE {metrics(recs).ece:.3f} -> {metrics(cal.calibrate(recs)).ece:.3f}")
            del cal.temperatures[key]
            cal.thresholds.pop(key, None)
    print(f"fitted on {sum(r['shots'] in shots for r in fit_rows)} answers; judged on {len(judge_rows)} others\n")
    print("| setting | question | n | T | accuracy | ECE before → after | threshold | selective accuracy (kept) |")
    print("|---|---|---|---|---|---|---|---|")
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
            print(f"| {k}-shot | {q} | {len(recs)} | {cal.temperature(key):.2f} | {b.accuracy:.0%} | "
                  f"{b.ece:.3f} → {a.ece:.3f} | {t if t is not None else '—'} (here: {best}) | {kept} |")
    if not args.no_write:
        SHIPPED.mkdir(exist_ok=True)
        out = SHIPPED / f"{args.model}.json"
        cal._report = None  # the file holds the fit, not its in-sample report
        cal.save(out)
        print(f"\nwrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
