"""Offline: could a perfectly calibrated model meet issue 32's calibration rows on these sets, at these sizes?

For each setting the rows judge (ECE where 150+ answers; precision at p ≥ 0.7 where 20+ answers reach it), the
shipped map's probabilities, each set judged by the fit on the other sets (``heldout_fit.loo``), are taken as
true: labels are drawn from them ``--draws`` times, and a model whose every stated probability is exactly right
is judged as the rows judge ours. It prints, per setting, the ECE ours reads, the share of draws in which the
calibrated model meets the ECE bound, and what the calibrated model is right on at p ≥ 0.7 (the mean stated top
of the answers kept: a precision bound above it is a demand on sharpness, which calibration cannot give); then
the chance that it meets each row on every set at once. No model runs.

    python bench/heldout_floor.py --model qwen2.5-coder-1.5b bench/heldout_runs/qwen15-*.json.gz \\
        bench/heldout_runs/h3-ex1-15.json.gz
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_fit as hf  # noqa: E402
from heldout_carry import ECE_ONE, ECE_ZERO, GATE_PREC, MIN_KEPT, MIN_N, kept  # noqa: E402
from heldout_load import load_runs  # noqa: E402

from jev_shared.calibration import Record, metrics  # noqa: E402


def pass_rate(recs: Sequence[Record], bound: float, draws: int, rng: random.Random) -> float:
    """The share of draws in which a model stating exactly these probabilities, truly, reads ECE ≤ ``bound``."""
    met = 0
    for _ in range(draws):
        drawn = [Record(r.probabilities, rng.choices(list(r.probabilities), list(r.probabilities.values()))[0])
                 for r in recs]
        met += metrics(drawn).ece <= bound
    return met / draws


def table(by_setting: dict[tuple[str, int], list[Record]], draws: int) -> str:
    rng = random.Random(0)
    lines = ["| set | setting | n | ECE (ours, left out) | bound | a calibrated model meets it | kept at p ≥ 0.7 | "
             "right among them: ours / a calibrated model |", "|---|---|---|---|---|---|---|---|"]
    joint = {0: 1.0, 1: 1.0}
    sharp = []
    for (name, shots), recs in sorted(by_setting.items()):
        if shots not in (0, 1):
            continue
        right, n_kept = kept(recs)
        tops = [max(r.probabilities.values()) for r in recs if max(r.probabilities.values()) >= hf.GATE - 1e-12]
        judged_ece = len(recs) >= MIN_N
        judged_prec = n_kept >= MIN_KEPT
        if not (judged_ece or judged_prec):
            continue
        bound = ECE_ZERO if shots == 0 else ECE_ONE
        rate = pass_rate(recs, bound, draws, rng) if judged_ece else math.nan
        if judged_ece:
            joint[shots] *= rate
        calibrated = sum(tops) / len(tops) if tops else math.nan
        if judged_prec:
            sharp.append(calibrated >= GATE_PREC)
        setting = "zero-shot" if shots == 0 else "one example per option"
        lines.append(f"| {name} | {setting} | {len(recs)} | {metrics(recs).ece:.3f} | "
                     f"{bound if judged_ece else '—'} | {f'{rate:.0%}' if judged_ece else '—'} | "
                     f"{n_kept} | {f'{right / n_kept:.0%} / {calibrated:.0%}' if judged_prec else '—'} |")
    lines += ["", f"A calibrated model meets ECE ≤ {ECE_ZERO} zero-shot on every set with {MIN_N}+ answers in "
              f"{joint[0]:.0%} of draws, ≤ {ECE_ONE} with one example per option on every such set in {joint[1]:.0%} "
              f"(the sets drawn apart); ≥ {GATE_PREC:.0%} right at p ≥ 0.7 is within its reach (its expected "
              f"precision there ≥ {GATE_PREC:.0%}) on {sum(sharp)} of {len(sharp)} settings."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args(argv)
    hf.MODEL = args.model
    found, _, paths = load_runs(args.raw, args.model)
    decisions = [d for d in found if d.answered]
    print(f"{args.model}: {len(decisions)} answers from {', '.join(p.name for p in paths)}; the shipped map "
          f"({hf.shipped_fit(args.model)}), each set left out of its fit; {args.draws} draws\n")
    print(table(hf.loo(decisions, hf.FITS[hf.shipped_fit(args.model)]), args.draws))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
