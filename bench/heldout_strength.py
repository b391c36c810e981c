"""Offline: how much of the prior a model divides out, per kind, chosen leave-one-dataset-out.

Over a model's saved ``bench/heldout.py`` runs of one setting (``--shots 1``: one example per option, where the
prior divided out is the examples' own lean): each set's right answers with the prior divided out at each
strength (0: off; 0.25; 0.5: its square root; 1: whole), the strength chosen on the *other* sets of its kind
(most right answers pooled; a tie keeps the shipped strength, then the larger), and that set judged by it beside
the shipped strength (``models.DEBIAS_STRENGTH``). The noise of a set's difference is the paired one: the items
the two strengths answer differently, right under one and wrong under the other (b and c): the exact
two-sided sign test (McNemar's) of c against b says how often a coin would split them at least as unevenly;
a set is "lower beyond noise" where the chosen strength loses with p < 0.05.

    python -m bench heldout_strength --model qwen2.5-coder-1.5b --shots 1 bench/heldout_runs/qwen15-*.json.gz …

No model runs here. A strength of 0 with examples also means no prior is asked at run time, so the question's
own examples give no labelled answers and no calibration of their own (``priors.examples_prior``).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_fit as hf  # noqa: E402
from heldout import Decision  # noqa: E402
from heldout_load import load_runs  # noqa: E402

from jev_shared.models import debias_strength  # noqa: E402

STRENGTHS = (0.0, 0.25, 0.5, 1.0)


def right_at(d: Decision, strength: float) -> bool:
    """Whether the top answer is right with the prior divided out at ``strength`` (the engine's floors)."""
    rec = hf.record(d, strength if strength else False)
    return max(rec.probabilities, key=rec.probabilities.__getitem__) == d.label


def choose(right: dict[float, dict[str, int]], sets: Sequence[str], shipped: float,
           candidates: Sequence[float] = STRENGTHS) -> float:
    """The strength among ``candidates`` with the most right answers pooled over ``sets``; a tie: the shipped
    one, then the larger."""
    return max(candidates, key=lambda s: (sum(right[s][n] for n in sets), s == shipped, s))


def paired(ds: Sequence[Decision], a: float, b: float) -> tuple[int, int]:
    """(right under ``a`` only, right under ``b`` only) on the same items."""
    ra, rb = [right_at(d, a) for d in ds], [right_at(d, b) for d in ds]
    return sum(x and not y for x, y in zip(ra, rb)), sum(y and not x for x, y in zip(ra, rb))


def sign_p(b: int, c: int) -> float:
    """Two-sided exact sign test: P(a split at least this uneven) of b + c fair coin flips."""
    n, k = b + c, min(b, c)
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n) if n else 1.0


def kind_table(decisions: Sequence[Decision], kind: str, model: str, shots: int,
               candidates: Sequence[float] = STRENGTHS) -> list[str]:
    ds = [d for d in decisions if d.kind == kind and d.shots == shots and d.prior]
    sets = sorted({d.set for d in ds})
    if not sets:
        return []
    shipped = debias_strength(model, kind, bool(shots))
    never = hf.held_out_sets()
    by_set = {n: [d for d in ds if d.set == n] for n in sets}
    right = {s: {n: sum(right_at(d, s) for d in by_set[n]) for n in sets} for s in STRENGTHS}
    lines = []
    held = {"shipped": 0, "chosen": 0}
    for n in sets:
        others = [m for m in sets if m != n and m not in never] or [n]
        pick = choose(right, others, shipped, candidates)
        lose, gain = paired(by_set[n], shipped, pick)
        diff, p = gain - lose, sign_p(lose, gain)
        held["shipped"] += right[shipped][n]
        held["chosen"] += right[pick][n]
        cells = " / ".join(str(right[s][n]) for s in STRENGTHS)
        flag = ("lower, beyond noise" if p < 0.05 else "lower, within noise") if diff < 0 else ""
        lines.append(f"| {kind} | {n} | {len(by_set[n])} | {cells} | {pick:g} (on {'+'.join(others)}) | "
                     f"{right[shipped][n]} → {right[pick][n]} ({diff:+d}: {gain} gained, {lose} lost, p {p:.2f}) {flag} |")
    pooled = " / ".join(str(sum(right[s].values())) for s in STRENGTHS)
    lines.append(f"| {kind} | **all** | {len(ds)} | {pooled} | shipped {shipped:g} | "
                 f"held out: {held['shipped']} → {held['chosen']} |")
    return lines


def table(decisions: Sequence[Decision], model: str, shots: int, candidates: Sequence[float] = STRENGTHS) -> str:
    head = ["| kind | set | n | right at strength " + " / ".join(f"{s:g}" for s in STRENGTHS)
            + " | chosen on the others | right: shipped → chosen (paired sign test) |", "|---|---|---|---|---|---|"]
    return "\n".join(head + [line for kind in hf.KINDS for line in kind_table(decisions, kind, model, shots, candidates)])


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--shots", type=int, default=1)
    ap.add_argument("--candidates", default="", help="the strengths chosen among (default: all of STRENGTHS), e.g. "
                    "0.25,0.5,1: with examples, 0 drops the examples' labelled answers")
    args = ap.parse_args(argv)
    hf.MODEL = args.model
    found, _, paths = load_runs(args.raw, args.model)
    decisions = [d for d in found if d.answered]
    print(f"{args.model}, {hf.SETTINGS[args.shots]}: from {', '.join(p.name for p in paths)}")
    candidates = tuple(float(x) for x in args.candidates.split(",")) if args.candidates else STRENGTHS
    print(table(decisions, args.model, args.shots, candidates))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
