"""Offline: how honest each reading of a ``heldout_orders`` run is, as listed, reversed and both orders combined.

Over a saved ``python -m bench heldout_orders --raw FILE`` run: per reading, accuracy and the ECE (top label, 10
bins) pooled and per set, each beside what a perfectly calibrated model stating the same probabilities reads on
that many answers (``heldout_fit.ece_noise``: the pooled 90th percentile, each set's 95th; ``*``: above it).
"Both" is the normalised geometric mean of the two readings, as ``order="both"`` answers (``orders.py``).

    python -m bench heldout_orders_ece bench/heldout_runs/orders-ex1-15.jsonl.gz

No model runs here.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from heldout import read_run  # noqa: E402
from heldout_fit import ece_noise  # noqa: E402

from jev_shared.calibration import Record, metrics  # noqa: E402

Reading = Callable[[dict[str, Any]], dict[str, float]]


def both(row: dict[str, Any]) -> dict[str, float]:
    """The two readings' normalised geometric mean, in the listed order."""
    weights = {k: math.sqrt(max(p, 0.0) * max(row["reversed"].get(k, 0.0), 0.0)) for k, p in row["listed"].items()}
    total = sum(weights.values())
    return {k: w / total for k, w in weights.items()}


READINGS: dict[str, Reading] = {"listed": lambda r: r["listed"], "reversed": lambda r: r["reversed"], "both": both}


def ece_rows(rows: Sequence[dict[str, Any]], draws: int = 500) -> list[str]:
    """A markdown table: per reading, right answers and the pooled ECE with its band, then each set's ECE / 95th."""
    rows = [r for r in rows if r.get("listed") and r.get("reversed")]
    sets = sorted({r["set"] for r in rows})
    out = ["| reading | right | ECE pooled (median, p90) | " + " | ".join(f"{s} (ECE / p95)" for s in sets) + " |",
           "|---" * (3 + len(sets)) + "|"]
    for name, read in READINGS.items():
        recs = [Record(read(r), r["label"]) for r in rows]
        ece, (median, p90) = metrics(recs).ece, ece_noise(recs, draws)
        cells = []
        for s in sets:
            own = [Record(read(r), r["label"]) for r in rows if r["set"] == s]
            mine, [p95] = metrics(own).ece, ece_noise(own, draws, (0.95,))
            cells.append(f"{mine:.3f}{'*' if mine > p95 else ''} / {p95:.3f}")
        right = sum(max(rec.probabilities, key=rec.probabilities.__getitem__) == rec.label for rec in recs)
        out.append(f"| {name} | {right} of {len(recs)} | {ece:.3f}{'*' if ece > p90 else ''} ({median:.3f}, {p90:.3f}) | "
                   + " | ".join(cells) + " |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="heldout_orders_ece", description=ece_rows.__doc__)
    ap.add_argument("runs", nargs="+", type=Path, help="heldout_orders --raw files (JSON lines, gzipped or not)")
    ap.add_argument("--draws", type=int, default=500, help="draws of a calibrated model's labels per band")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for path in args.runs for line in read_run(path).splitlines() if line.strip()]
    print("\n".join(ece_rows(rows, args.draws)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
