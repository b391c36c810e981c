"""Offline: does a question's own examples' calibration beat the shipped one on the public sets?

With one example per option the engine asks each example with the others as its examples (the
examples' prior); those answers are labelled. ``bench/heldout.py`` saved them per set. Here each
set's answers are calibrated by the shipped form fitted on the *other* sets (leave-one-dataset-out),
then by a temperature fitted on that set's own examples' answers and shrunk toward 1 (the shipped
fit's verdict) with ``strength`` pseudo-answers, and judged on the set's scored items, which the
examples never were.

    python bench/heldout_examples.py bench/heldout_runs/qwen-defaults.json.gz
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from heldout import Decision  # noqa: E402
from heldout_fit import FITS, GATE, SHIPPED_FIT, Fit, example_cells, gate_cell, record  # noqa: E402
from heldout_load import load_runs  # noqa: E402

from jev_shared.calibration import (  # noqa: E402
    GLOBAL,
    Calibrator,
    Context,
    Record,
    metrics,
)
from jev_shared.calibration.fit import fit_temperature_toward  # noqa: E402
from jev_shared.readout import divide_prior  # noqa: E402

STRENGTHS = (2.0, 5.0, 10.0, 20.0)


def labelled(rows: dict, prior: list[float], keys: list[str], qkey: str, context: Context | None = None) -> list[Record]:
    """The examples' answers as the engine gives them (divided by the prior they make), with their truth
    (and the question's context, which a feature map reads)."""
    return [Record(dict(zip(keys, divide_prior(row, prior))), lab, qkey, context)
            for row, lab in zip(rows["rows"], rows["labels"])]


def evaluate(decisions: Sequence[Decision], heldout_rows: dict, fit: Fit) -> str:
    lines = ["| set | n | examples | shipped (left out): ECE, right at p ≥ 0.7 | "
             + " | ".join(f"+ examples, strength {s:g}" for s in STRENGTHS) + " |",
             "|" + "---|" * (4 + len(STRENGTHS))]
    pooled: dict[str, list[Record]] = {"shipped": [], **{str(s): [] for s in STRENGTHS}}
    for (name, _shots), rows, items, base, qkey in example_cells(decisions, sorted(heldout_rows.items()), fit):
        keys = list(items[0].answered)
        shipped = base.calibrate([record(d) for d in items])
        own = base.calibrate(labelled(rows, items[0].prior, keys, qkey, record(items[0]).context))
        cells = [name, str(len(items)), str(len(own)), f"{metrics(shipped).ece:.3f}, {gate_cell(shipped)}"]
        pooled["shipped"] += shipped
        for s in STRENGTHS:
            t = fit_temperature_toward([Record(r.probabilities, r.label, GLOBAL) for r in own], 1.0, s)
            after = Calibrator({GLOBAL: t}).calibrate([Record(r.probabilities, r.label, GLOBAL) for r in shipped])
            pooled[str(s)] += after
            cells.append(f"T {t:.2f}: {metrics(after).ece:.3f}, {gate_cell(after)}")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("| all | | | " + " | ".join(f"{metrics(rs).ece:.3f}, {gate_cell(rs, GATE)}" for rs in pooled.values())
                 + " |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--base", default=SHIPPED_FIT, choices=list(FITS), help="the shipped fit's form")
    args = ap.parse_args(argv)
    decisions, rows, _ = load_runs(args.raw)
    print(evaluate([d for d in decisions if d.answered], rows, FITS[args.base]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
