"""Offline: does a refit on more runs carry better than the fit shipped? (issue 32, H3 session 14)

Each set (and setting) of the *new* runs is judged twice, leave-one-dataset-out: by the form fitted on the
other sets of the runs the shipped file was fitted on (``--old``), and by the same form fitted on the other sets
of every run given (the refit). Both are judged on the same answers (the new runs' and the old ones', a later
file's item replacing an earlier one's); a set marked ``held_out`` is in no fit. The rule a refit ships by
(docs/quality.md): a lower worst-set and mean ECE left out, and, a temperature keeping the top answer, no set's
accuracy lower. The shipped file itself (in-sample on the old sets) is printed beside for reference.

    python bench/heldout_refit.py --model qwen2.5-coder-1.5b --old bench/heldout_runs/qwen15-*.json.gz \\
        -- bench/heldout_runs/qwen15-*.json.gz bench/heldout_runs/h3-ex1-15.json.gz …
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_carry as hc  # noqa: E402
import heldout_fit as hf  # noqa: E402
from heldout import Decision  # noqa: E402
from heldout_load import load_runs  # noqa: E402

from jev_shared.calibration import GLOBAL, Calibrator, Record, examples_calibrator, metrics, shipped  # noqa: E402
from jev_shared.models import debias_strength  # noqa: E402
from jev_shared.priors import powered  # noqa: E402
from jev_shared.readout import divide_prior  # noqa: E402

Key = tuple[str, int]


def fold_fits(judge: Sequence[Decision], train: Sequence[Decision], form: str,
              keep: tuple[Sequence[Decision], Sequence[str]] | None = None) -> dict[str, Calibrator]:
    """Per set of ``judge``: ``form`` fitted on ``train``'s other sets (never a held-out set). ``keep`` = (old
    runs, kinds): only those kinds' maps from this fit, every other map the old runs' fit's."""
    never = hf.held_out_sets()
    fit = hf.FITS[form]
    out = {}
    for s in sorted({d.set for d in judge}):
        cal = fit([hf.record(d) for d in train if d.set != s and d.set not in never and d.answered])
        if keep is not None:
            cal = merged(fit([hf.record(d) for d in keep[0] if d.set != s and d.set not in never and d.answered]),
                         cal, keep[1])
        out[s] = cal
    return out


def judged(judge: Sequence[Decision], train: Sequence[Decision], form: str,
           keep: tuple[Sequence[Decision], Sequence[str]] | None = None) -> dict[Key, list[Record]]:
    """Each set of ``judge`` calibrated by its fold's fit (:func:`fold_fits`)."""
    return calibrated(judge, fold_fits(judge, train, form, keep))


def calibrated(judge: Sequence[Decision], cals: dict[str, Calibrator]) -> dict[Key, list[Record]]:
    out: dict[Key, list[Record]] = {}
    for d in judge:
        if d.answered:
            out.setdefault((d.set, d.shots), []).extend(cals[d.set].calibrate([hf.record(d)]))
    return out


def own_refined(judge: Sequence[Decision], heldout_rows: dict, cals: dict[str, Calibrator]) -> dict[Key, list[Record]]:
    """As ``heldout_fit.own_examples``: each example setting then calibrated by the question's own examples."""
    out = {}
    for tag, rows in heldout_rows.items():
        name, shots = tag.split("/")
        items = [d for d in judge if d.set == name and d.shots == int(shots) and d.answered]
        power = debias_strength(hf.MODEL, items[0].kind, True) if items else 0.0
        if not items or not rows.get("rows") or not items[0].prior or power <= 0.0:
            continue
        base, prior = cals[name], powered(items[0].prior, power)
        first = hf.record(items[0])
        own = examples_calibrator(base, first.question_id, list(items[0].answered),
                                  [(divide_prior(r, prior), lab) for r, lab in zip(rows["rows"], rows["labels"])],
                                  context=first.context)
        out[(name, int(shots))] = own.calibrate([Record(r.probabilities, r.label, GLOBAL)
                                                 for r in base.calibrate([hf.record(d) for d in items])])
    return out


def rows_table(judge: Sequence[Decision], heldout_rows: dict, cals: dict[str, Calibrator]) -> str:
    """The issue's rows per set under these fold fits, the question's own examples where it has them, beside the
    ECE estimator's own noise (heldout_carry's columns)."""
    now, own = calibrated(judge, cals), own_refined(judge, heldout_rows, cals)
    lines = ["| set | setting | n | accuracy | ECE, right at p ≥ 0.7 (left out) | + own examples | calibrated model "
             "reads (median, 90th pct) | issue's rows |", "|---|---|---|---|---|---|---|---|"]
    for (s, shots), recs in sorted(now.items(), key=lambda k: (k[0][1], k[0][0])):
        best = own.get((s, shots)) or recs
        lines.append(f"| {s} | {hf.SETTINGS[shots]} | {len(recs)} | {metrics(recs).accuracy:.1%} | {hc.cell(recs)} | "
                     f"{hc.cell(own.get((s, shots)))} | {hc.noise(best)} | {hc.verdict(best, shots)} |")
    return "\n".join(lines)


def merged(old: Calibrator, new: Calibrator, kinds: Sequence[str]) -> Calibrator:
    """``old`` with the maps of ``kinds`` (``*score``, ``*score+examples``) taken from ``new``: a refit of
    those kinds only (the kind keys exist in both, as ``heldout_fit.own_kinds`` writes them)."""
    for kind in kinds:
        for k in (f"*{kind}", f"*{kind}+examples"):
            if k in new.maps:
                old.temperatures[k], old.maps[k] = new.temperatures[k], new.maps[k]
    return old


def write_kinds(new: Sequence[Decision], model: str, form: str, kinds: Sequence[str]) -> Path:
    """The shipped file with the maps of ``kinds`` refitted on every run given (never a held-out set)."""
    never = hf.held_out_sets()
    cal = shipped(model)
    if cal is None or not kinds:
        raise SystemExit("--write needs a shipped file to refit and --kinds")
    refit = hf.FITS[form]([hf.record(d) for d in new if d.answered and d.set not in never])
    out = hf.SHIPPED / f"{model}.json"
    merged(cal, refit, kinds).save(out)
    return out


def as_shipped(judge: Sequence[Decision], model: str) -> dict[Key, list[Record]]:
    cal = shipped(model)
    out: dict[Key, list[Record]] = {}
    for d in judge:
        out.setdefault((d.set, d.shots), []).extend(cal.calibrate([hf.record(d)]) if cal else [hf.record(d)])
    return out


def summary_line(name: str, groups: dict[Key, list[Record]]) -> str:
    eces = {k: metrics(v).ece for k, v in groups.items()}
    worst = max(eces, key=eces.__getitem__)
    ex = {k: e for k, e in eces.items() if k[1]}
    worst_ex = max(ex, key=ex.__getitem__) if ex else None
    pooled = [r for v in groups.values() for r in v]
    big = {k: v for k, v in groups.items() if len(v) >= hc.MIN_N and k[1] in (0, 1)}
    met = sum(metrics(v).ece <= (hc.ECE_ZERO if k[1] == 0 else hc.ECE_ONE) for k, v in big.items())
    right, n = hc.kept(pooled)
    ex_cell = f"{ex[worst_ex]:.3f} ({worst_ex[0]})" if worst_ex else "—"
    return (f"| {name} | {eces[worst]:.3f} ({worst[0]}, {worst[1]}) | {ex_cell} | {sum(eces.values()) / len(eces):.3f} | "
            f"{metrics(pooled).ece:.3f} | {metrics(pooled).nll:.3f} | {right}/{n} ({right / max(n, 1):.0%}) | "
            f"{met} of {len(big)} |")


def table(old: Sequence[Decision], new: Sequence[Decision], model: str, form: str, kinds: Sequence[str] = ()) -> str:
    runs = {"shipped file (in-sample on the old sets)": as_shipped(new, model),
            "fit on the old runs (left out)": judged(new, old, form),
            "**refit on every run (left out)**": judged(new, new, form)}
    if kinds:
        runs[f"**refit of {', '.join(kinds)} only (left out)**"] = judged(new, new, form, (old, kinds))
    lines = ["| set | setting | n | accuracy | " + " | ".join(f"{n}: ECE, right at p ≥ 0.7" for n in runs) + " |",
             "|" + "---|" * (4 + len(runs))]
    first = runs["fit on the old runs (left out)"]
    for (s, shots), recs in sorted(first.items(), key=lambda k: (k[0][1], k[0][0])):
        lines.append(f"| {s} | {hf.SETTINGS[shots]} | {len(recs)} | {metrics(recs).accuracy:.1%} | "
                     + " | ".join(hc.cell(g[(s, shots)]) for g in runs.values()) + " |")
    lines += ["", "| fit | worst ECE (set) | worst with examples | mean ECE | pooled ECE | pooled NLL | right at p ≥ 0.7 | "
              "issue's ECE rows met |", "|---|---|---|---|---|---|---|---|"]
    lines += [summary_line(name, g) for name, g in runs.items()]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+", help="every run (the refit's), oldest first")
    ap.add_argument("--old", type=Path, nargs="+", required=True, help="the runs the shipped file was fitted on")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--form", default="", help="heldout_fit.FITS name (default: the model's shipped form)")
    ap.add_argument("--strengths", default="", help="as heldout_carry.py --strengths")
    ap.add_argument("--kinds", default="", help="also: only these kinds' maps refitted (e.g. score), the rest the old fit's")
    ap.add_argument("--rows", action="store_true", help="the issue's rows per set under the refit (of --kinds only, "
                    "if given), with the question's own examples and the ECE's noise; only")
    ap.add_argument("--write", action="store_true", help="write the shipped file: its maps of --kinds replaced by the "
                    "refit on every run given (a held-out set in no fit), every other map as shipped")
    args = ap.parse_args(argv)
    hf.MODEL = args.model
    if args.strengths:
        hc.set_strengths(args.model, args.strengths)
    old = [d for d in load_runs(args.old, args.model)[0] if d.answered]
    found, heldout_rows, _ = load_runs(args.raw, args.model)
    new = [d for d in found if d.answered]
    print(f"{args.model}: old {len(old)} answers, new {len(new)}")
    kinds = tuple(k for k in args.kinds.split(",") if k)
    if args.rows:
        form = args.form or hf.shipped_fit(args.model)
        print(rows_table(new, heldout_rows, fold_fits(new, new, form, (old, kinds) if kinds else None)))
        return 0
    if args.write:
        print(f"wrote {write_kinds(new, args.model, args.form or hf.shipped_fit(args.model), kinds)}")
        return 0
    print(table(old, new, args.model, args.form or hf.shipped_fit(args.model), kinds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
