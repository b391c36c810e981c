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

The question's own traffic (``traffic``): per set and setting, the answers as shipped (the model's calibration),
with the lean over the set's states divided out (``calibration.fit_traffic``: no label read), with a temperature
fitted on ``--labels`` labelled items, and both; judged on the items not labelled, each ECE beside the 95th
percentile of what a perfectly calibrated model stating the same probabilities reads at that size (``*``: above it).
The shipped map asked with examples (``examples_map``): the product's path with examples (the kind's map, then
the question's own examples' temperature) against the same path with no map before the examples' fit.

    python -m bench heldout_strength traffic --model qwen2.5-coder-1.5b bench/heldout_runs/*.json*
    python -m bench heldout_strength examples_map --model qwen2.5-coder-1.5b bench/heldout_runs/*.json*

A saved ``heldout_orders`` run's ECE per reading (``orders_ece``): as listed, reversed and both combined, beside a
calibrated model's band (``python -m bench heldout_orders_ece bench/heldout_runs/orders-ex1-15.jsonl.gz``).

The examples' prior from a few of them (``few_priors``): on the runs that saved every example's held-out answer
(``meta.heldout_rows``) and the whole prior (``--debias true``), each set with more than ``--calls`` examples judged
with the prior divided at run time (names that share a first token read on), with the mean of every example's
held-out answer as saved (first tokens only), with the mean of ``--calls`` of them drawn at random, and with the
lean those few show toward the options that are not their own answer; the model's strength for the kind, 60
draws each.

    python -m bench heldout_strength few_priors bench/heldout_runs/*.json*
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import heldout_fit as hf  # noqa: E402
from heldout import Decision, read_run  # noqa: E402
from heldout_load import load_runs  # noqa: E402

from jev_shared.calibration import GLOBAL, Calibrator, Record, examples_calibrator, fit_traffic, metrics, shipped  # noqa: E402
from jev_shared.models import debias_strength  # noqa: E402
from jev_shared.orders import both_orders  # noqa: E402
from jev_shared.priors import powered  # noqa: E402
from jev_shared.readout import divide_prior  # noqa: E402

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
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        return SUBCOMMANDS[argv[0]](argv)
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


# --- the question's own traffic, a few labels, and the shipped map asked with examples ----------------------------


def _loss(recs: Sequence[Record]) -> float:
    """The mean log loss of the true answer."""
    return -sum(math.log(max(r.probabilities[r.label], 1e-9)) for r in recs) / len(recs)


def _acc(recs: Sequence[Record]) -> float:
    return sum(max(r.probabilities, key=r.probabilities.__getitem__) == r.label for r in recs) / len(recs)


def _ece(recs: Sequence[Record]) -> str:
    """The ECE, starred where it is above a perfectly calibrated model's 95th percentile at this size."""
    e = metrics(recs).ece
    return f"{e:.3f}{'*' if e > hf.ece_noise(recs, 300, (0.95,))[0] else ''}"


def _shipped(decisions: Sequence[Decision], model: str) -> list[Record]:
    cal = shipped(model)
    assert cal is not None, f"no calibration is shipped for {model}"
    recs = [hf.record(d) for d in decisions]
    return [Record(cal._temper(r.probabilities, hf.key(d), r.context), r.label) for r, d in zip(recs, decisions)]  # noqa: SLF001


def traffic_rows(decisions: Sequence[Decision], model: str, labels: int, seed: int = 1) -> list[str]:
    """(per set and setting, a seed's draw of the labelled items; ``--seed`` draws another)"""
    return _traffic_rows(decisions, model, labels, seed)


def _traffic_rows(decisions: Sequence[Decision], model: str, labels: int, seed: int) -> list[str]:
    """Per set and setting: shipped, the lean divided out, ``labels`` labels' temperature, both (judged on the rest)."""
    groups: dict[tuple[str, int], list[Decision]] = {}
    for d in decisions:
        groups.setdefault((d.set, d.shots), []).append(d)
    pooled: dict[str, list[Record]] = {m: [] for m in ("shipped", "lean", "labels", "both", "shrunk", "on shipped",
                                                       "half lean on shipped")}
    ship_cal = shipped(model)
    out = []
    for (name, shots), ds in sorted(groups.items()):
        if len(ds) < labels + 20:
            continue
        base = [Record(r.probabilities, r.label, "q", r.context) for r in (hf.record(d) for d in ds)]
        order = list(range(len(ds)))
        random.Random(seed).shuffle(order)
        fit_on, judged = [base[i] for i in order[:labels]], order[labels:]
        dists = {"q": [r.probabilities for r in base]}  # every state the user sent; no label read
        cals = {"lean": fit_traffic(dists, min_labels=len(base) + 1), "labels": Calibrator.fit(fit_on, min_records=1),
                "both": fit_traffic(dists, fit_on, min_labels=1),
                "shrunk": Calibrator.fit(fit_on, min_records=1, shrink=10.0),
                "on shipped": Calibrator.fit(fit_on, min_records=1, shrink=10.0, base=ship_cal)}
        ship = _shipped(ds, model)
        res = {"shipped": [ship[i] for i in judged], **{m: c.calibrate([base[i] for i in judged]) for m, c in cals.items()}}
        ship_q = [Record(r.probabilities, r.label, "q", b.context) for r, b in zip(ship, base)]  # no label read
        half = fit_traffic({"q": [r.probabilities for r in ship_q]}, min_labels=len(base) + 1)
        half.biases = {q: {k: v / 2 for k, v in b.items()} for q, b in half.biases.items()}  # half the lean
        res["half lean on shipped"] = half.calibrate([ship_q[i] for i in judged])
        for m, recs in res.items():
            pooled[m] += recs
        out.append(f"| {name} | {hf.SETTINGS[shots]} | {len(judged)} | "
                   + " / ".join(f"{_acc(r):.0%}" for r in res.values()) + " | "
                   + " / ".join(_ece(r) for r in res.values()) + " | "
                   + " / ".join(f"{_loss(r):.2f}" for r in res.values()) + " |")
    p90 = hf.ece_noise(pooled["shipped"], 200, (0.9,))[0]
    out.append(f"| **pooled** | | {len(pooled['shipped'])} | " + " / ".join(f"{_acc(r):.1%}" for r in pooled.values())
               + " | " + " / ".join(f"{metrics(r).ece:.3f}" for r in pooled.values()) + f" (90th pct {p90:.3f}) | "
               + " / ".join(f"{_loss(r):.3f}" for r in pooled.values()) + " |")
    outside = {m: sum("*" in line.split(" | ")[4].split(" / ")[i] for line in out) for i, m in enumerate(pooled)}
    out.append("| **sets outside their 95% band** | | | | " + " / ".join(str(n) for n in outside.values()) + " | |")
    return ["| set | setting | judged | right: shipped / lean / labels / both / labels shrunk (--shrink 10) / "
            "labels on top of the shipped calibration (jev calibrate) / half the lean over the shipped calibration's "
            "answers, no label | ECE (same order) | log loss (same order) |",
            "|---|---|---|---|---|---|", *out]


def examples_map_rows(decisions: Sequence[Decision], rows: dict, model: str) -> list[str]:
    """With examples: the shipped map then the examples' own fit, against no map then the examples' own fit."""
    cal = shipped(model)
    assert cal is not None
    out, pooled = [], {}
    for tag, saved in rows.items():
        name, shots = tag.split("/")
        items = [d for d in decisions if d.set == name and d.shots == int(shots)]
        if not items or not saved.get("rows") or not items[0].prior:
            continue
        prior = powered(items[0].prior, debias_strength(model, items[0].kind, True))
        own_rows = [(divide_prior(r, prior), lab) for r, lab in zip(saved["rows"], saved["labels"])]
        recs = [hf.record(d) for d in items]
        key, res = hf.key(items[0]), {}
        for label, base in (("map", cal), ("none", Calibrator())):
            own = examples_calibrator(base, key, list(items[0].answered), own_rows, context=recs[0].context)
            first = [Record(base._temper(r.probabilities, key, r.context), r.label, GLOBAL) for r in recs]  # noqa: SLF001
            res[label] = own.calibrate(first)
            pooled.setdefault((items[0].kind, label), []).extend(res[label])
        out.append(f"| {name} | {items[0].kind} | {len(items)} | {_ece(res['map'])} / {_ece(res['none'])} | "
                   f"{_loss(res['map']):.3f} / {_loss(res['none']):.3f} |")
    for (kind, label), recs in sorted(pooled.items()):
        out.append(f"| **{kind}, pooled** | {label} | {len(recs)} | {metrics(recs).ece:.3f} | {_loss(recs):.3f} |")
    return ["| set | kind | n | ECE: map / none | log loss: map / none |", "|---|---|---|---|---|", *out]


def studies(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog=f"heldout_strength {argv[0]}")
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--labels", type=int, default=30, help="traffic: the labelled items per set and setting")
    ap.add_argument("--seed", type=int, default=1, help="traffic: which items are labelled (a shuffle's seed)")
    args = ap.parse_args(argv[1:])
    hf.MODEL = args.model
    found, rows, paths = load_runs(args.raw, args.model)
    decisions = [d for d in found if d.answered]
    print(f"{args.model}: from {', '.join(p.name for p in paths)}")
    lines = (traffic_rows(decisions, args.model, args.labels, args.seed) if argv[0] == "traffic"
             else examples_map_rows(decisions, rows, args.model))
    print("\n".join(lines))
    return 0


def curve_rows(decisions: Sequence[Decision], model: str, sizes: Sequence[int], seeds: int = 3) -> list[str]:
    """Labels → held-out ECE, log loss and 90% decision sets' coverage: per number of labelled items, pooled over
    every set and setting with room to judge (``n + 30`` items or more) and ``seeds`` draws of the labels; the
    calibration ``jev calibrate`` fits (a temperature shrunk by 10, on top of the model's shipped calibration) and split-conformal sets on the calibrated
    labelled answers."""
    from jev_shared import DecisionSets

    groups: dict[tuple[str, int], list[Decision]] = {}
    for d in decisions:
        groups.setdefault((d.set, d.shots), []).append(d)
    ship_cal = shipped(model)
    out = ["| labels | fits | judged | ECE (a calibrated model's 90th pct) | log loss | coverage at 0.9 | mean set size | "
           "coverage per fit judged on 150+ |", "|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        judged: list[Record] = []
        hits = sizes_sum = fits = 0
        spread: list[float] = []
        for ds in groups.values():
            if len(ds) < n + 30:
                continue
            base = [Record(r.probabilities, r.label, GLOBAL, r.context) for r in (hf.record(d) for d in ds)]
            for seed in range(1, seeds + 1):
                order = list(range(len(ds)))
                random.Random(seed).shuffle(order)
                fit_on, rest = [base[i] for i in order[:n]], [base[i] for i in order[n:]]
                cal = Calibrator.fit(fit_on, min_records=1, shrink=10.0, base=ship_cal)
                on = cal.calibrate(fit_on)
                sets = DecisionSets.fit([r.probabilities for r in on], [r.label for r in on], 0.9)
                after = cal.calibrate(rest)
                judged += after
                fits += 1
                mine = 0
                for r in after:
                    chosen = sets.of(r.probabilities)
                    mine += r.label in chosen
                    sizes_sum += len(chosen)
                hits += mine
                if len(after) >= 150:
                    spread.append(mine / len(after))
        if judged:
            p90 = hf.ece_noise(judged, 100, (0.9,))[0]
            out.append(f"| {n} | {fits} | {len(judged)} | {metrics(judged).ece:.3f} ({p90:.3f}) | {_loss(judged):.3f} | "
                       f"{hits / len(judged):.1%} | {sizes_sum / len(judged):.2f} | "
                       + (f"{min(spread):.1%}–{max(spread):.1%} ({len(spread)})" if spread else "—") + " |")
    return out


def main_curve(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="heldout_strength curve", description=curve_rows.__doc__)
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--model", default="qwen2.5-coder-1.5b")
    ap.add_argument("--sizes", default="10,20,30,50,100")
    args = ap.parse_args(argv[1:])
    hf.MODEL = args.model
    found, _, _ = load_runs(args.raw, args.model)
    print("\n".join(curve_rows([d for d in found if d.answered], args.model, [int(x) for x in args.sizes.split(",")])))
    return 0


def main_traffic(argv: Sequence[str]) -> int:
    return studies(argv)


def main_examples_map(argv: Sequence[str]) -> int:
    return studies(argv)


def _mean_rows(rows: Sequence[Sequence[float]]) -> list[float]:
    return [sum(col) / len(rows) for col in zip(*rows)]


def _off_own(rows: Sequence[Sequence[float]], truths: Sequence[int]) -> list[float]:
    """Each option's share of the answers whose truth is another option (its own answer left out)."""
    shares: list[list[float]] = [[] for _ in rows[0]]
    for row, truth in zip(rows, truths):
        for j, p in enumerate(row):
            if j != truth:
                shares[j].append(p / max(1.0 - row[truth], 1e-6))
    known = [sum(s) / len(s) for s in shares if s]
    est = [sum(s) / len(s) if s else sum(known) / len(known) for s in shares]
    return [e / sum(est) for e in est]


def _judged(items: Sequence[tuple[list[float], int]], prior: Sequence[float]) -> tuple[int, float]:
    right, loss = 0, 0.0
    for raw, truth in items:
        p = divide_prior(raw, list(prior))
        right += max(range(len(p)), key=p.__getitem__) == truth
        loss -= math.log(max(p[truth], 1e-6))
    return right, loss


def main_few_priors(argv: Sequence[str]) -> int:
    from heldout import load_sets, undivided
    ap = argparse.ArgumentParser(prog="heldout_strength few_priors")
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--calls", type=int, default=3)
    args = ap.parse_args(argv[1:])
    sets, rng = load_sets(), random.Random(7)
    for path in args.raw:
        try:
            run = json.loads(read_run(path))
        except (ValueError, OSError):
            continue
        if not isinstance(run, dict) or not run.get("meta", {}).get("heldout_rows") or run["meta"].get("debias") == "auto":
            continue  # a run under debias="auto" saved the prior already powered
        model = run["meta"].get("model", "qwen2.5-coder-0.5b")
        for key, saved in run["meta"]["heldout_rows"].items():
            name, shots = key.split("/")
            labels, rows = saved["labels"], saved["rows"]
            shown = sets[name]["examples"] + (sets[name].get("more_examples", []) if shots == "2" else [])
            ds = [d for d in run["decisions"] if (d["set"], str(d["shots"])) == (name, shots) and d["prior"]]
            if len(rows) <= args.calls or not ds or len(shown) != len(rows):
                continue
            strength = debias_strength(model, ds[0]["kind"], True)
            items = [([raw[k] for k in labels], labels.index(d["label"])) for d in ds
                     if (raw := d.get("raw") or undivided(d["answered"], d["prior"]))]
            truths = [labels.index(str(e["label"])) for e in shown]
            by_option: dict[int, list[list[float]]] = {}
            for row, truth in zip(rows, truths):
                by_option.setdefault(truth, []).append(row)
            draws = [rng.sample(range(len(rows)), args.calls) for _ in range(60)]
            whole = [dict(zip(ds[0]["answered"], ds[0]["prior"]))[k] for k in labels]  # as divided at run time
            cells = {"as divided": [_judged(items, powered(whole, strength))],
                     "every example's answers": [_judged(items, powered(_mean_rows(
                         [_mean_rows(g) for g in by_option.values()]), strength))],
                     f"{args.calls} drawn": [_judged(items, powered(_mean_rows([rows[i] for i in d]), strength))
                                             for d in draws],
                     f"{args.calls} drawn, off their own answer": [
                         _judged(items, powered(_off_own([rows[i] for i in d], [truths[i] for i in d]), strength))
                         for d in draws],
                     "none": [_judged(items, [1.0] * len(labels))]}
            print(f"{path.name} {name} {shots}-shot, {len(rows)} examples, {len(items)} items: " + "; ".join(
                f"{what} {sum(r for r, _ in got) / len(got):.1f} right, log loss "
                f"{sum(loss for _, loss in got) / len(got) / len(items):.3f}" for what, got in cells.items()))
    return 0


def main_orders_ece(argv: Sequence[str]) -> int:
    """A saved ``heldout_orders --raw`` run: per reading (as listed, reversed, both combined as ``order="both"``
    answers), right answers and the ECE pooled and per set, each beside what a perfectly calibrated model stating
    the same probabilities reads at that size (pooled: median and 90th percentile; a set: its 95th; ``*``: above)."""
    ap = argparse.ArgumentParser(prog="heldout_strength orders_ece", description=main_orders_ece.__doc__)
    ap.add_argument("runs", nargs="+", type=Path, help="heldout_orders --raw files (JSON lines, gzipped or not)")
    ap.add_argument("--draws", type=int, default=500, help="draws of a calibrated model's labels per band")
    args = ap.parse_args(argv[1:])
    rows = [json.loads(line) for path in args.runs for line in read_run(path).splitlines() if line.strip()]
    rows = [r for r in rows if r.get("listed") and r.get("reversed")]
    sets = sorted({r["set"] for r in rows})

    def both(r: dict[str, Any]) -> dict[str, float]:
        return both_orders(r["listed"], r["reversed"])

    print("| reading | right | ECE pooled (median, p90) | " + " | ".join(f"{s} (ECE / p95)" for s in sets) + " |")
    print("|---" * (3 + len(sets)) + "|")
    for name, read in (("listed", lambda r: r["listed"]), ("reversed", lambda r: r["reversed"]), ("both", both)):
        recs = [Record(read(r), r["label"]) for r in rows]
        ece, (median, p90) = metrics(recs).ece, hf.ece_noise(recs, args.draws)
        cells = []
        for s in sets:
            own = [Record(read(r), r["label"]) for r in rows if r["set"] == s]
            mine, [p95] = metrics(own).ece, hf.ece_noise(own, args.draws, (0.95,))
            cells.append(f"{mine:.3f}{'*' if mine > p95 else ''} / {p95:.3f}")
        right = sum(max(rec.probabilities, key=rec.probabilities.__getitem__) == rec.label for rec in recs)
        print(f"| {name} | {right} of {len(recs)} | {ece:.3f}{'*' if ece > p90 else ''} ({median:.3f}, {p90:.3f}) | "
              + " | ".join(cells) + " |")
    return 0


SUBCOMMANDS = {"traffic": main_traffic, "examples_map": main_examples_map, "curve": main_curve,
               "few_priors": main_few_priors, "orders_ece": main_orders_ece}


if __name__ == "__main__":
    raise SystemExit(main())
