"""Decision sets and the data-chosen gate band on recorded answers of both embedded models.

No model runs here. ``--write`` turns the saved held-out runs (``bench/heldout.py``: every answer with
the prior it was divided by) into each item's answer as the product gives it by default (the model's
debias strength, the calibration shipped for it) and its truth, in one small file
(``heldout_runs/decision-sets.json.gz``) that this script and ``tests/test_decision_sets.py`` read.
Then, per set and model, over 20 random half/half splits (half fits, half judges): the mean coverage
of :class:`DecisionSets` at 0.8, 0.9 and 0.95 (with its standard error over the splits), the mean set
size and the share decided alone (a set of one option) with its error, beside a fixed threshold's
(decide alone when the top probability is at least 0.7); and on the yes/no sets, :class:`Band` with
``max_error=0.05``: error among allowed and the ask rate it reported against the one observed.

Judged one way, a split's coverage moves by about 5 points: the halves come from one pool of ~200
answers, so a fit on the easier half is judged on the harder one and over-covers (and the reverse).
"Both ways" judges each half by a fit on the other and averages the two: the same splits, the two
halves' luck cancelling (the standard error falls from ~1.1 to ~0.3 points). "Randomized" fits with
``randomized=True`` (the boundary drawn so that coverage averages the target, not up to 1/(n+1) above).

    python -m bench decision_sets --write        # the answers file, from heldout_runs/*.json.gz
    python -m bench decision_sets                # the tables (docs/decisions.md)
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from statistics import mean, stdev
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from jev_shared import Band, DecisionSets, SetReport  # noqa: E402

RUNS = HERE / "heldout_runs"
ANSWERS = RUNS / "decision-sets.json.gz"
#: The recorded runs, per model: zero-shot answers, the 60 items and the extra ones (heldout_runs/README.md).
SOURCES = {
    "qwen2.5-coder-0.5b": ["qwen-defaults.json.gz", "qwen-extra-b.json.gz", "qwen-trec-fine.json.gz"],
    "qwen2.5-coder-1.5b": ["qwen15-zero.json.gz", "qwen15-trec-fine.json.gz"],
}
SETS = ("atis", "trec_fine", "sst2", "sst5")
COVERAGES = (0.8, 0.9, 0.95)
FIXED = 0.7
SPLITS = 20


def product_answers(model: str, decisions: Sequence[Any]) -> list[tuple[dict[str, float], str]]:
    """Each zero-shot decision as the product answers by default: debiased as the engine does for the
    model, then the calibration shipped for it (each model has its own)."""
    from heldout_fit import raw

    from jev_shared.calibration import Context, Record, shipped
    from jev_shared.models import debias_strength
    from jev_shared.priors import powered
    from jev_shared.readout import PRIOR_FLOOR, PRIOR_SHARE, divide_prior

    cal = shipped(model)
    out = []
    for d in decisions:
        probs = raw(d)
        prior = powered(d.prior, debias_strength(model, d.kind, False)) if d.prior else None
        if prior:
            probs = dict(zip(probs, divide_prior(list(probs.values()), prior)))
        if cal is not None:
            k = len(probs)
            ctx = Context(kind=d.kind, examples=0, prior=tuple(prior) if prior else None,
                          prior_floor=max(PRIOR_FLOOR, PRIOR_SHARE / max(k, 1)))
            probs = cal.calibrate([Record(probs, d.label, cal.key_for(None, d.kind), ctx)])[0].probabilities
        out.append(({k: round(v, 6) for k, v in probs.items()}, d.label))
    return out


def write() -> None:
    from heldout import load

    data: dict[str, Any] = {"meta": {"date": time.strftime("%Y-%m-%d"), "sources": SOURCES}, "answers": {}}
    for model, files in SOURCES.items():
        paths = [RUNS / f for f in files if (RUNS / f).is_file()]
        decisions = [d for d in load(paths) if d.shots == 0 and d.set in SETS and d.answered]
        for name in SETS:
            rows = product_answers(model, [d for d in decisions if d.set == name])
            if rows:
                data["answers"].setdefault(model, {})[name] = {"kind": next(d.kind for d in decisions
                                                                            if d.set == name), "rows": rows}
    ANSWERS.write_bytes(gzip.compress(json.dumps(data).encode()))
    print(f"wrote {ANSWERS}", file=sys.stderr)


def read_answers() -> dict[str, dict[str, Any]]:
    return json.loads(gzip.decompress(ANSWERS.read_bytes()))["answers"]


def splits(n: int, seed: str, k: int = SPLITS) -> list[tuple[list[int], list[int]]]:
    """``k`` random half/half splits, drawn with a seed of each set's own (one seed for every set would
    draw the same splits wherever two sets have as many items, and make their rows' noise one)."""
    rng = random.Random(f"jev-decision-sets-{seed}")
    out = []
    for _ in range(k):
        idx = list(range(n))
        rng.shuffle(idx)
        out.append((idx[: n // 2], idx[n // 2:]))
    return out


def _judge(rows: Sequence[tuple[dict[str, float], str]], fit: list[int], judge: list[int], coverage: float,
           seed: str | None = None) -> SetReport:
    sets = DecisionSets.fit([rows[i][0] for i in fit], [rows[i][1] for i in fit], coverage,
                            randomized=seed is not None, seed=seed)
    return sets.evaluate([rows[i][0] for i in judge], [rows[i][1] for i in judge])


def set_row(rows: Sequence[tuple[dict[str, float], str]], coverage: float, seed: str) -> dict[str, float]:
    """Means over the splits: coverage (fit on one half, judged on the other; its standard error over the
    splits), set size, share decided alone and its error; and the coverage judged both ways (each half by a
    fit on the other, averaged: the two halves' luck cancels), with the conservative and the randomized boundary."""
    cells: dict[str, list[float]] = {"coverage": [], "size": [], "alone": [], "alone_error": [], "both": [],
                                     "both_randomized": []}
    for k, (fit, judge) in enumerate(splits(len(rows), seed)):
        rep, back = _judge(rows, fit, judge, coverage), _judge(rows, judge, fit, coverage)
        for key, v in zip(cells, (rep.coverage, rep.mean_size, rep.decided, rep.error_decided)):
            cells[key].append(v)
        cells["both"].append((rep.coverage + back.coverage) / 2)
        drawn = [_judge(rows, a, b, coverage, f"{seed}/{coverage}/{k}/{d}").coverage
                 for d, (a, b) in enumerate(((fit, judge), (judge, fit)))]
        cells["both_randomized"].append(mean(drawn))
    out = {key: mean(v) for key, v in cells.items()}
    out["coverage_se"] = stdev(cells["coverage"]) / math.sqrt(len(cells["coverage"]))
    return out


def fixed_row(rows: Sequence[tuple[dict[str, float], str]], threshold: float = FIXED) -> tuple[float, float]:
    """(share decided alone, its error) when the top probability must reach ``threshold``."""
    alone = [(max(p, key=p.__getitem__), y) for p, y in rows if max(p.values()) >= threshold]
    return len(alone) / len(rows), sum(c != y for c, y in alone) / max(len(alone), 1)


def gate_row(rows: Sequence[tuple[dict[str, float], str]], seed: str, max_error: float = 0.05) -> dict[str, float]:
    """Band(max_error) fitted on one half, judged on the other: means over the splits."""
    cells: dict[str, list[float]] = {"error": [], "reported_ask": [], "observed_ask": [], "allowed": []}
    for fit, judge in splits(len(rows), seed):
        band = Band.fit([rows[i][0]["true"] for i in fit], [rows[i][1] for i in fit], max_error=max_error)
        ps, ys = [rows[i][0]["true"] for i in judge], [rows[i][1] for i in judge]
        ask, err, _ = band.judge(ps, ys)
        cells["error"].append(err)
        cells["reported_ask"].append(band.ask_rate)
        cells["observed_ask"].append(ask)
        cells["allowed"].append(sum(p >= band.allow for p in ps) / len(ps))
    return {k: mean(v) for k, v in cells.items()}


def tables(answers: dict[str, dict[str, Any]]) -> str:
    out = ["| model | set | n | options | target | coverage (± s.e.) | both ways | both ways, randomized "
           f"| mean set size | decided alone (error) | top ≥ {FIXED}: decided alone (error) |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    within = {"coverage": 0, "both": 0, "both_randomized": 0}
    above: dict[str, list[float]] = {key: [] for key in within}
    for model, per in answers.items():
        for name, s in per.items():
            rows = [(p, y) for p, y in s["rows"]]
            alone, err = fixed_row(rows)
            for c in COVERAGES:
                r = set_row(rows, c, f"{model}/{name}")
                for key in within:
                    within[key] += abs(r[key] - c) <= 0.02
                    above[key].append(r[key] - c)
                out.append(f"| {model} | {name} | {len(rows)} | {len(rows[0][0])} | {c:.2f} | {r['coverage']:.3f} "
                           f"± {r['coverage_se']:.3f} | {r['both']:.3f} | {r['both_randomized']:.3f} "
                           f"| {r['size']:.2f} | {r['alone']:.0%} ({r['alone_error']:.1%}) | {alone:.0%} ({err:.1%}) |")
    rows_n = len(out) - 2
    out += ["", f"within ±2 points of the target: one way {within['coverage']}/{rows_n}, both ways "
                f"{within['both']}/{rows_n}, both ways randomized {within['both_randomized']}/{rows_n}; mean coverage "
                f"above the target (points): " + ", ".join(f"{100 * mean(v):+.2f}" for v in above.values())]
    out += ["", "| model | set | gate max_error=0.05: error among allowed | allowed | reported ask rate "
            "| observed ask rate |", "|---|---|---|---|---|---|"]
    for model, per in answers.items():
        for name, s in per.items():
            if s["kind"] == "noul":
                g = gate_row([(p, y) for p, y in s["rows"]], f"{model}/{name}")
                out.append(f"| {model} | {name} | {g['error']:.3f} | {g['allowed']:.0%} | {g['reported_ask']:.1%} "
                           f"| {g['observed_ask']:.1%} |")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="rebuild the answers file from the saved runs first")
    args = ap.parse_args(argv)
    if args.write:
        write()
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"{time.strftime('%Y-%m-%d')}, {SPLITS} random half/half splits, load average {load}\n")
    print(tables(read_answers()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
