"""Offline, per model: calibration that carries between sets (issue 32), judged leave-one-dataset-out.

For one embedded model, every saved run of ``bench/heldout.py`` made on it: per set and setting, the
answers' accuracy, then ECE and right among answers at p ≥ 0.7 under what ships for that model today
(the 0.5B: its calibration before issue 32, ``bench/heldout_runs/shipped-before-32-0.5b.json``; the 1.5B:
none, and no debias), under the form fitted on the *other* sets (``heldout_fit.loo``; a set marked
``held_out`` in sets.json is in no fit), and that fit refined by the question's own examples (one example
per option). The issue's rows are checked per set: ECE ≤ 0.08 zero-shot and ≤ 0.06 with one example per
option where a setting has 150+ answers; ≥ 90% right at p ≥ 0.7 where 20+ answers reach it.

    python bench/heldout_carry.py --model qwen2.5-coder-1.5b bench/heldout_runs/*.json*
    python bench/heldout_carry.py --model qwen2.5-coder-1.5b bench/heldout_runs/*.json* --forms  # forms tried
    python bench/heldout_carry.py --model qwen2.5-coder-1.5b bench/heldout_runs/*.json* --debias  # strength per kind
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_fit as hf  # noqa: E402
from heldout import Decision  # noqa: E402
from heldout_load import load_runs  # noqa: E402

from jev_shared.calibration import Calibrator, Record, metrics  # noqa: E402

#: What ships for each model before issue 32's fit: (its calibration file or None, debias as today).
TODAY: dict[str, tuple[Path | None, bool]] = {
    "qwen2.5-coder-0.5b": (HERE / "heldout_runs" / "shipped-before-32-0.5b.json", True),
    "qwen2.5-coder-1.5b": (None, False),
}
#: The forms compared for --forms (heldout_fit.FITS names): the shipped one and its nearest rivals.
FORMS = ("as answered", "T pooled", "T per kind", "T + top per kind", "T(entropy)", "T(raw_entropy)",
         "T(entropy, examples)", "T(entropy, log_k)", "T(log_k, examples)", "top(entropy)(entropy)",
         "T(entropy), every kind's own", hf.OWN_KINDS, "P(right) on all", "P(right) on logit + all",
         "P(right) on logit + all, ridge 10", "P(right) on logit + all + debias moved")
ECE_ZERO, ECE_ONE, MIN_N, GATE_PREC, MIN_KEPT = 0.08, 0.06, 150, 0.90, 20
Key = tuple[str, int]


def today(decisions: Sequence[Decision], model: str) -> dict[Key, list[Record]]:
    path, debias = TODAY[model]
    cal = Calibrator.load(path) if path else Calibrator()
    out: dict[Key, list[Record]] = {}
    for d in decisions:
        out.setdefault((d.set, d.shots), []).extend(cal.calibrate([hf.record(d, debias)]))
    return out


def kept(recs: Sequence[Record]) -> tuple[int, int]:
    top = [r for r in recs if max(r.probabilities.values()) >= hf.GATE - 1e-12]
    return sum(max(r.probabilities, key=r.probabilities.get) == r.label for r in top), len(top)  # type: ignore[arg-type]


def verdict(recs: Sequence[Record], shots: int) -> str:
    """The issue's rows for one setting: ECE (where 150+ answers) and precision at p ≥ 0.7 (where 20+ reach it)."""
    out = []
    if len(recs) >= MIN_N and shots in (0, 1):
        bound = ECE_ZERO if shots == 0 else ECE_ONE
        out.append("ECE ok" if metrics(recs).ece <= bound else f"ECE > {bound}")
    right, n = kept(recs)
    if n >= MIN_KEPT:
        out.append("p≥0.7 ok" if right / n >= GATE_PREC else "p≥0.7 < 90%")
    return "; ".join(out) or "—"


def noise(recs: Sequence[Record]) -> str:
    """The ECE a perfectly calibrated model stating these probabilities reads on this many answers:
    median, 90th percentile (the estimator's own noise: a bound below the 90th is met by luck or not at all)."""
    mid, high = hf.ece_noise(recs)
    return f"{mid:.3f}, {high:.3f}"


def cell(recs: Sequence[Record] | None) -> str:
    return hf._cell(recs) if recs else "—"  # noqa: SLF001 - one formatting for every table


def rows(decisions: Sequence[Decision], model: str, heldout_rows: dict, form: str) -> str:
    """The per-set table: today's, the fit left out, the fit + the question's own examples."""
    before, now = today(decisions, model), hf.loo(decisions, hf.FITS[form])
    own = hf.own_examples(decisions, heldout_rows, hf.FITS[form])
    never = hf.held_out_sets()
    kinds = {d.set: (d.kind, len(d.answered)) for d in decisions}
    acc_before = {k: metrics(v).accuracy for k, v in before.items()}
    lines = ["| set | kind, options | setting | n | accuracy (today → now) | today: ECE, right at p ≥ 0.7 | "
             "**fitted on the other sets** | + the question's own examples | ECE a calibrated model reads here (median, 90th pct) | "
             "issue's rows (now, with its own examples where it has them) |", "|" + "---|" * 10]
    for (s, shots), recs in sorted(now.items(), key=lambda k: (k[0][1], k[0][0])):
        best = own.get((s, shots)) or recs
        acc = f"{acc_before[(s, shots)]:.1%} → {metrics(recs).accuracy:.1%}"
        name = f"{s} (held out)" if s in never else s
        lines.append(f"| {name} | {kinds[s][0]}, {kinds[s][1]} | {hf.SETTINGS[shots]} | {len(recs)} | {acc} | "
                     f"{cell(before[(s, shots)])} | {cell(recs)} | {cell(own.get((s, shots)))} | "
                     f"{noise(best)} | {verdict(best, shots)} |")
    for shots in sorted({k[1] for k in now}):
        b = [r for (s, k), rs in before.items() if k == shots for r in rs]
        n = [r for (s, k), rs in now.items() if k == shots for r in rs]
        o = [r for (s, k), rs in now.items() if k == shots for r in (own.get((s, k)) or rs)]
        lines.append(f"| **all** | | {hf.SETTINGS[shots]} | {len(n)} | {metrics(b).accuracy:.1%} → "
                     f"{metrics(n).accuracy:.1%} | {cell(b)} | {cell(n)} | {cell(o)} | | |")
    return "\n".join(lines)


def compare(decisions: Sequence[Decision], forms: Sequence[str]) -> str:
    """Forms side by side on the same folds (each set fitted on the others): per set and setting, ECE and
    right at p ≥ 0.7 under each, beside the ECE a calibrated model reads; then per setting the worst set,
    the mean over sets, the pooled log loss and right at p ≥ 0.7 (issue 32's correctness model)."""
    judged = {f: hf.loo(decisions, hf.FITS[f]) for f in forms}
    kinds = {d.set: (d.kind, len(d.answered)) for d in decisions}
    first = judged[forms[0]]
    lines = ["| set | kind, options | setting | n | accuracy | " + " | ".join(f"{f}: ECE, right at p ≥ 0.7" for f in forms)
             + " | a calibrated model reads (median, 90th pct) |", "|" + "---|" * (6 + len(forms))]
    for (s, shots), recs in sorted(first.items(), key=lambda k: (k[0][1], k[0][0])):
        lines.append(f"| {s} | {kinds[s][0]}, {kinds[s][1]} | {hf.SETTINGS[shots]} | {len(recs)} | "
                     f"{metrics(recs).accuracy:.1%} | " + " | ".join(cell(judged[f][(s, shots)]) for f in forms)
                     + f" | {noise(recs)} |")
    lines += ["", "| form | setting | worst ECE (set) | mean ECE | pooled NLL | right at p ≥ 0.7 | issue's ECE rows met |",
              "|---|---|---|---|---|---|---|"]
    for f in forms:
        for shots in sorted({k[1] for k in first}):
            part = {k: v for k, v in judged[f].items() if k[1] == shots}
            eces = {k[0]: metrics(v).ece for k, v in part.items()}
            worst = max(eces, key=eces.__getitem__)
            big = [k for k, v in part.items() if len(v) >= MIN_N]
            met = sum(metrics(part[k]).ece <= (ECE_ZERO if shots == 0 else ECE_ONE) for k in big)
            pooled = [r for v in part.values() for r in v]
            right, n = kept(pooled)
            lines.append(f"| {f} | {hf.SETTINGS[shots]} | {eces[worst]:.3f} ({worst}) | {sum(eces.values()) / len(eces):.3f} | "
                         f"{metrics(pooled).nll:.3f} | {right}/{n} ({right / max(n, 1):.0%}) | {met} of {len(big)} |")
    return "\n".join(lines)


def debias_rows(decisions: Sequence[Decision]) -> str:
    """Accuracy and log loss (as answered) with the prior divided out not at all / half / whole, pooled per
    kind and setting, and each set's: what the strength per kind is chosen on."""
    lines = ["| kind | setting | sets | n | accuracy: off / half / whole | NLL as answered: off / half / whole |",
             "|---|---|---|---|---|---|"]
    groups: dict[tuple[str, int], list[Decision]] = {}
    for d in decisions:
        if d.prior:
            groups.setdefault((d.kind, d.shots), []).append(d)
    for (kind, shots), ds in sorted(groups.items()):
        ms = [metrics([hf.record(d, a if a else False) for d in ds]) for a in hf.ALPHAS]
        sets = ", ".join(f"{s} " + "/".join(f"{metrics([hf.record(d, a if a else False) for d in ds if d.set == s]).accuracy:.0%}"
                                             for a in hf.ALPHAS) for s in sorted({d.set for d in ds}))
        lines.append(f"| {kind} | {hf.SETTINGS[shots]} | {sets} | {len(ds)} | "
                     + " / ".join(f"{m.accuracy:.1%}" for m in ms) + " | " + " / ".join(f"{m.nll:.3f}" for m in ms) + " |")
    return "\n".join(lines)


def set_strengths(model: str, spec: str) -> None:
    """models.DEBIAS_STRENGTH for ``model`` replaced in this process: "kind[+examples]=power,..."."""
    from jev_shared import models

    table = {(kind, examples): 0.0 for kind in ("choice", "noul", "score") for examples in (False, True)}
    for part in spec.split(","):
        name, value = part.split("=")
        table[(name.removesuffix("+examples"), name.endswith("+examples"))] = float(value)
    models.DEBIAS_STRENGTH[model] = table


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", choices=sorted(TODAY))
    ap.add_argument("--form", default="", help="the form fitted (heldout_fit.FITS; default: the model's shipped one)")
    ap.add_argument("--forms", action="store_true", help="the forms of FORMS compared, one line each, only")
    ap.add_argument("--debias", action="store_true", help="debias strength per kind, only")
    ap.add_argument("--compare", nargs="+", default=None, metavar="FORM",
                    help="these forms (heldout_fit.FITS) side by side on the same folds, per set, only")
    ap.add_argument("--sets", default="", help="only these sets (comma-separated)")
    ap.add_argument("--strengths", default="", help="debias strengths tried in place of models.py's, e.g. "
                    "choice=0.5,choice+examples=0.5,noul=0.5,score=1 (every kind not named: 0)")
    args = ap.parse_args(argv)
    hf.MODEL = args.model
    if args.strengths:
        set_strengths(args.model, args.strengths)
    found, heldout_rows, paths = load_runs(args.raw, args.model)  # runs only; a later file's item replaces an earlier's
    only = set(args.sets.split(",")) - {""}
    decisions = [d for d in found if d.answered and (not only or d.set in only)]
    print(f"{args.model}: {len(decisions)} answers, {len({d.set for d in decisions})} sets, from "
          f"{', '.join(p.name for p in paths)}; held out: {', '.join(sorted(hf.held_out_sets())) or 'none'}")
    if args.debias:
        print(debias_rows(decisions))
    elif args.compare:
        print(compare(decisions, args.compare))
    elif args.forms:
        print(hf.summary(decisions, FORMS))
    else:
        print(rows(decisions, args.model, heldout_rows, args.form or hf.shipped_fit(args.model)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
