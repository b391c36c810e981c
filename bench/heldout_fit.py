"""Offline: calibration and debias on the held-out bench's saved decisions, judged leave-one-dataset-out.

No model runs here: ``bench/heldout.py`` saved every answer with the prior it was divided by, so the
raw window distribution is exact (``raw ∝ answered · max(prior, floor)``), and any calibration can be
fitted on some sets and judged on another. Leave-one-dataset-out: each set is judged by a fit made on
the *other* sets only, so no figure comes from a fit that saw its set.

    python -m bench heldout_fit bench/heldout_runs/qwen-defaults.json.gz              # the tables
    python -m bench heldout_fit bench/heldout_runs/qwen-*.json* --summary          # every form tried, one line each
    python -m bench heldout_fit bench/heldout_runs/qwen-*.json* --doc              # docs/quality.md's table
    python -m bench heldout_fit bench/heldout_runs/qwen-*.json* --write            # ship the fit on every set
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from heldout import Decision  # noqa: E402
from heldout_load import CANDIDATES, load_runs  # noqa: E402

from jev_shared.calibration import (  # noqa: E402
    EXAMPLES_STRENGTH,
    GLOBAL,
    SHIPPED,
    Calibrator,
    Context,
    Record,
    ece_draws,
    examples_calibrator,
    metrics,
)
from jev_shared.models import debias_strength  # noqa: E402
from jev_shared.priors import powered  # noqa: E402
from jev_shared.readout import PRIOR_FLOOR, PRIOR_SHARE, divide_prior  # noqa: E402

#: The floor the saved runs were divided with (before the floor scaled with the options, PRIOR_SHARE): raw()
#: inverts exactly that.
RUN_FLOOR = 1e-3

GATE = 0.7
MODEL = "qwen2.5-coder-0.5b"
SETTINGS = {0: "zero-shot", 1: "one example per option", 2: "two examples per option"}
Fit = Callable[[list[Record]], Calibrator]


def raw(d: Decision) -> dict[str, float]:
    """The window's distribution before the prior's division (what ``debias=False`` answers): saved by
    runs since the extra items, else recovered from the answer and the floor those runs divided with."""
    if d.raw:
        return d.raw
    if not d.prior:
        return d.answered
    scaled = [p * max(r, RUN_FLOOR) for p, r in zip(d.answered.values(), d.prior)]
    total = sum(scaled) or 1.0
    return {k: v / total for k, v in zip(d.answered, scaled)}


def key(d: Decision) -> str:
    """The fit an answer uses, as the engine looks it up (``Calibrator.key_for``)."""
    return f"*{d.kind}" + ("+examples" if d.shots else "")


def context(d: Decision, prior: list[float] | None) -> Context:
    """What the engine knows about the answer at run time (client.calibration_context)."""
    k = len(d.answered)
    return Context(kind=d.kind, examples=d.shots * k, prior=tuple(prior) if prior else None,
                   prior_floor=max(PRIOR_FLOOR, PRIOR_SHARE / max(k, 1)))


def record(d: Decision, debias: bool | float = True) -> Record:
    """As answered (debias on), raw (off), or divided by the prior raised to ``debias`` (a partial division)."""
    if not d.prior:
        return Record(d.answered, d.label, key(d), context(d, None))
    if debias is True:  # the division as the engine does it now (its strength per kind, its floors)
        strength = debias_strength(MODEL, d.kind, bool(d.shots))
        if strength <= 0.0:  # no prior asked at run time: the window as read, and no prior in the context
            return Record(raw(d), d.label, key(d), context(d, None))
        prior = powered(d.prior, strength)
        return Record(dict(zip(d.answered, divide_prior(list(raw(d).values()), prior))), d.label, key(d),
                      context(d, prior))
    if debias is False:
        return Record(raw(d), d.label, key(d), context(d, None))
    prior = powered(d.prior, float(debias))
    probs = divide_prior(list(raw(d).values()), prior)  # the engine's floors
    return Record(dict(zip(d.answered, probs)), d.label, key(d), context(d, prior))


def ship_fit(records: list[Record], top: bool = True) -> Calibrator:
    """The shipped form: one temperature (and top-label scaling) per kind key; a key with no records
    gets the fit on every record (the global fit), not 'as answered'."""
    return Calibrator.fit(records, min_records=10, top=top, target=0.95)


def t_only(records: list[Record]) -> Calibrator:
    return ship_fit(records, top=False)


def none_fit(records: list[Record]) -> Calibrator:
    return Calibrator()


def pooled_t(records: list[Record]) -> Calibrator:
    """One temperature for every kind: a question's kind says less about its difficulty than its set does."""
    return Calibrator.fit(records, per_question=False, target=0.95)


def pooled_top(records: list[Record]) -> Calibrator:
    """One temperature and one top-label scaling for every kind."""
    return Calibrator.fit(records, per_question=False, top=True, target=0.95)


def shipped_before(records: list[Record]) -> Calibrator:
    """The calibration shipped before the public sets (fitted on the project's own tickets): today's figure."""
    return Calibrator.load(HERE / "heldout_runs" / "shipped-before.json")


KINDS = ("choice", "noul", "score")


def own_kinds(base: Fit, own: dict[str, Fit], min_records: int = 30, apart: tuple[str, ...] = ()) -> Fit:
    """``base`` fitted on every answer, and for each kind in ``own`` that kind's map fitted on its own answers
    (with and without examples), under both of its keys (``*noul``, ``*noul+examples``: the keys the engine's
    ``Calibrator.key_for`` looks up, with a temperature of 1 so that it finds them). Why: a yes/no's spread
    means another thing than a choice's; one map for every kind made the 1.5B's bold, right nouls timid.
    A kind in ``apart`` gets two maps, its zero-shot answers' and its answers with examples' (each where it has
    ``min_records``; else the kind's pooled one); a choice named there keeps ``base`` zero-shot."""
    def fit(records: list[Record]) -> Calibrator:
        cal = base(records)
        for kind in {*own, *apart}:
            rs = [r for r in records if r.question_id.split("+")[0] == f"*{kind}"]
            if len(rs) < min_records:
                continue
            kind_fit = own.get(kind) or CANDIDATES["T(entropy)"]
            pooled = kind_fit(rs).maps[GLOBAL] if kind in own else None
            for k in (f"*{kind}", f"*{kind}+examples") if kind in own else (f"*{kind}+examples",):
                part = [r for r in rs if r.question_id == k]
                kmap = kind_fit(part).maps[GLOBAL] if kind in apart and len(part) >= min_records else pooled
                if kmap is not None:
                    cal.temperatures[k], cal.maps[k] = 1.0, kmap
        cal.thresholds = {GLOBAL: cal.evaluate(records).overall.threshold}  # the gate for 95%, every kind
        return cal
    return fit


#: The 1.5B's form: T(entropy) for choices, nouls' and scores' own T(entropy).
OWN_KINDS = "T(entropy), nouls' and scores' own"
FITS: dict[str, Fit] = {"shipped before": shipped_before, "as answered": none_fit, "T per kind": t_only, "T + top per kind": ship_fit,
                        "T pooled": pooled_t, "T + top pooled": pooled_top, **CANDIDATES}
FITS[OWN_KINDS] = own_kinds(CANDIDATES["T(entropy)"], {"noul": CANDIDATES["T(entropy)"], "score": CANDIDATES["T(entropy)"]})
FITS["T(entropy), every kind's own"] = own_kinds(CANDIDATES["T(entropy)"], {k: CANDIDATES["T(entropy)"] for k in KINDS})
#: The nouls' and scores' maps, each apart with and without examples (and choices
#: with examples their own), tried with the one-example runs of 60-190 items a set.
OWN_APART = "T(entropy), nouls' and scores' own, examples apart"
FITS[OWN_APART] = own_kinds(CANDIDATES["T(entropy)"], {"noul": CANDIDATES["T(entropy)"], "score": CANDIDATES["T(entropy)"]},
                            apart=("noul", "score"))
FITS[OWN_APART + ", choices too"] = own_kinds(CANDIDATES["T(entropy)"], {"noul": CANDIDATES["T(entropy)"],
                                                                         "score": CANDIDATES["T(entropy)"]},
                                               apart=("noul", "score", "choice"))


def held_out_sets() -> frozenset[str]:
    """The sets marked ``"held_out": true`` in sets.json: judged only, never in any fit."""
    sets = json.loads((HERE / "data" / "public" / "sets.json").read_text())
    return frozenset(name for name, meta in sets.items() if meta.get("held_out"))


def loo(decisions: Sequence[Decision], fit: Fit, debias: bool | float = True) -> dict[tuple[str, int], list[Record]]:
    """Each set's records calibrated by a fit on the other sets (both settings of them), never on a
    held-out set's (``held_out_sets``), which is judged by a fit on all the others."""
    sets = sorted({d.set for d in decisions})
    never = held_out_sets()
    out: dict[tuple[str, int], list[Record]] = {}
    for s in sets:
        cal = fit([record(d, debias) for d in decisions if d.set != s and d.set not in never and d.answered])
        for d in decisions:
            if d.set == s and d.answered:
                out.setdefault((s, d.shots), []).extend(cal.calibrate([record(d, debias)]))
    return out


def ece_floor(recs: Sequence[Record], draws: int = 200, quantile: float = 0.5) -> float:
    """The median (or ``quantile``) ECE of a perfectly calibrated model stating these probabilities on this
    many answers (labels drawn from the probabilities themselves): what a set this small reads at best."""
    return ece_noise(recs, draws, (quantile,))[0]


def ece_noise(recs: Sequence[Record], draws: int = 200, quantiles: Sequence[float] = (0.5, 0.9)) -> list[float]:
    """The ECE estimator's own noise here: quantiles of what a perfectly calibrated model stating these
    probabilities reads on this many answers (the 90th: a calibrated model reads above it one time in ten)."""
    out = ece_draws(recs, draws)  # the library's (jev calibrate prints the same band)
    return [out[min(int(q * len(out)), len(out) - 1)] for q in quantiles]


def gate_cell(recs: Sequence[Record], gate: float = GATE) -> str:
    kept = [r for r in recs if max(r.probabilities.values()) >= gate - 1e-12]
    right = sum(max(r.probabilities, key=r.probabilities.get) == r.label for r in kept)  # type: ignore[arg-type]
    return f"{right}/{len(kept)}" + (f" ({right / len(kept):.0%})" if kept else "")


def calibrated_precision(recs: Sequence[Record], gate: float = GATE) -> str:
    """Right at p ≥ gate that a perfectly calibrated model stating these probabilities would read: the
    mean stated top probability of the answers kept. Why: a precision target at a gate is a claim about
    how sharp the answers are, not only how calibrated; calibrated answers kept at 0.7–0.8 are right
    70–80% of the time."""
    tops = [max(r.probabilities.values()) for r in recs if max(r.probabilities.values()) >= gate - 1e-12]
    return f"{sum(tops) / len(tops):.0%}" if tops else "—"


def pooled_gate(groups: dict[Any, list[Record]], gate: float = GATE) -> str:
    return gate_cell([r for rs in groups.values() for r in rs], gate)


def table(decisions: Sequence[Decision], debias: bool = True) -> str:
    """Per set and setting: accuracy, and ECE / right at p ≥ 0.7 for each fit, judged left out."""
    judged = {name: loo(decisions, fit, debias) for name, fit in FITS.items()}
    head = ["set", "setting", "n", "accuracy"] + [f"{n}: ECE, right at p ≥ {GATE}" for n in FITS] + [
        "ECE of a calibrated model here"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (s, shots), recs in sorted(judged["as answered"].items()):
        cells = [s, SETTINGS[shots], str(len(recs)),
                 f"{metrics(recs).accuracy:.1%}"]
        for name in FITS:
            rs = judged[name][(s, shots)]
            cells.append(f"{metrics(rs).ece:.3f}, {gate_cell(rs)}")
        cells.append(f"{ece_floor(judged[list(FITS)[-1]][(s, shots)]):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    for name in FITS:
        eces = [metrics(rs).ece for rs in judged[name].values()]
        pooled = metrics([r for rs in judged[name].values() for r in rs]).ece
        lines.append(f"\n{name}: ECE worst {max(eces):.3f}, mean {sum(eces) / len(eces):.3f}, all answers pooled "
                     f"{pooled:.3f}; right at p ≥ {GATE}, all sets pooled: {pooled_gate(judged[name])}")
    return "\n".join(lines)


def summary(decisions: Sequence[Decision], names: Sequence[str] = ()) -> str:
    """One line a fit, judged left out: the worst set's ECE (zero-shot, and with examples), the mean and
    pooled ECE, the pooled log loss and right at p ≥ 0.7: what picks the shipped form."""
    lines = ["| fit | worst ECE (set) | worst with examples | mean ECE | pooled ECE | pooled NLL | right at p ≥ 0.7 |",
             "|---|---|---|---|---|---|---|"]
    for name in names or FITS:
        judged = loo(decisions, FITS[name])
        eces = {k: metrics(rs).ece for k, rs in judged.items()}
        worst = max(eces, key=eces.__getitem__)
        ex = {k: e for k, e in eces.items() if k[1]}
        worst_ex = max(ex, key=ex.__getitem__)
        pooled = metrics([r for rs in judged.values() for r in rs])
        lines.append(f"| {name} | {eces[worst]:.3f} ({worst[0]}, {worst[1]}) | {ex[worst_ex]:.3f} ({worst_ex[0]}, "
                     f"{worst_ex[1]}) | {sum(eces.values()) / len(eces):.3f} | {pooled.ece:.3f} | {pooled.nll:.3f} | "
                     f"{pooled_gate(judged)}; calibrated: {calibrated_precision([r for rs in judged.values() for r in rs])} |")
    return "\n".join(lines)


ALPHAS = (0.0, 0.5, 1.0)


def debias_table(decisions: Sequence[Decision]) -> str:
    """Debias off, half (the prior's square root) and on, per kind and set: accuracy, and ECE after the
    left-out fit of each (each variant fitted on its own answers of the other sets)."""
    fit = FITS["T + top per kind"]
    runs = {a: loo(decisions, fit, a if a != 0.0 else False) for a in ALPHAS}
    lines = ["| kind | set | setting | accuracy: off / half / on | ECE (left-out fit): off / half / on |",
             "|---|---|---|---|---|"]
    kinds = {d.set: d.kind for d in decisions}
    for (s, shots) in sorted(runs[1.0], key=lambda k: (kinds[k[0]], k[1], k[0])):
        ms = [metrics(runs[a][(s, shots)]) for a in ALPHAS]
        lines.append(f"| {kinds[s]} | {s} | {shots}-shot | " + " / ".join(f"{m.accuracy:.1%}" for m in ms) + " | "
                     + " / ".join(f"{m.ece:.3f}" for m in ms) + " |")
    for kind in sorted(set(kinds.values())):
        for shots in SETTINGS:
            groups = [[r for (s, k), rs in runs[a].items() if kinds[s] == kind and k == shots for r in rs] for a in ALPHAS]
            if groups[0]:
                lines.append(f"| {kind} | all | {shots}-shot | " + " / ".join(f"{metrics(g).accuracy:.1%}" for g in groups)
                             + " | " + " / ".join(f"{metrics(g).ece:.3f}" for g in groups) + " |")
    return "\n".join(lines)


#: The form shipped: best held out (each set judged by a fit that never saw it) on the 3,480 answers of
#: bench/heldout_runs/qwen-*.json*: the lowest worst-set ECE with examples and pooled log loss, within 0.002
#: of the lowest worst-set ECE, the most right at p >= 0.7, and two numbers (docs/quality.md).
SHIPPED_FIT = "T(entropy)"


#: Each model's form where it is not SHIPPED_FIT: the 1.5B's, left out on 17 public sets, ECE ≤ 0.08 on 2 of
#: the 7 sets with 150+ answers (one map for every kind: 1) and a lower pooled log loss (docs/quality.md).
SHIPPED_FITS = {"qwen2.5-coder-1.5b": OWN_KINDS}


def shipped_fit(model: str) -> str:
    """The FITS name of the form shipped for ``model``."""
    return SHIPPED_FITS.get(model, SHIPPED_FIT)


#: The form shipped before the feature maps (one temperature for every kind): the doc table's middle column.
PREVIOUS_FIT = "T pooled"


def _cell(recs: Sequence[Record] | None) -> str:
    return f"{metrics(recs).ece:.3f}, {gate_cell(recs)}" if recs else "—"


def example_cells(decisions: Sequence[Decision], heldout_rows: Iterable[tuple[str, dict]], fit: Fit
                  ) -> Iterator[tuple[tuple[str, str], dict, list[Decision], Calibrator, str]]:
    """Each example setting ("set/shots") that has answered items, examples' rows and a prior: ((set, shots),
    its rows, its items, the calibration fitted on the other sets, its question key)."""
    for tag, rows in heldout_rows:
        name, shots = tag.split("/")
        items = [d for d in decisions if d.set == name and d.shots == int(shots) and d.answered]
        if not items or not rows.get("rows") or not items[0].prior:
            continue
        fitted = fit([record(d) for d in decisions if d.set != name and d.set not in held_out_sets()])
        yield (name, shots), rows, items, fitted, record(items[0]).question_id


def own_examples(decisions: Sequence[Decision], heldout_rows: dict, fit: Fit,
                 strength: float = EXAMPLES_STRENGTH) -> dict[tuple[str, int], list[Record]]:
    """Each example setting's items, calibrated left out and then by the question's own examples, as the
    engine does it (``calibration.examples_calibrator``)."""
    out = {}
    for (name, shots), rows, items, base, qkey in example_cells(decisions, heldout_rows.items(), fit):
        power = debias_strength(MODEL, items[0].kind, True)
        if power <= 0.0:  # no prior asked at run time: the examples give no labelled answers (priors.py)
            continue
        prior = powered(items[0].prior, power)
        own = examples_calibrator(base, qkey, list(items[0].answered),
                                  [(divide_prior(r, prior), lab) for r, lab in zip(rows["rows"], rows["labels"])], strength,
                                  context=record(items[0]).context)
        out[(name, int(shots))] = own.calibrate([Record(r.probabilities, r.label, GLOBAL)
                                                 for r in base.calibrate([record(d) for d in items])])
    return out


def doc_table(decisions: Sequence[Decision], heldout_rows: dict[str, Any]) -> str:
    """docs/quality.md's table: per set and setting, the calibration shipped before the public sets (fitted on the
    project's tickets), the one temperature shipped until the feature maps, and the one shipped now (both judged
    left out), then the question's own examples on top of it."""
    old = shipped_before([])  # the old defaults (the whole prior, its floor) and the tickets' calibration
    before: dict[tuple[str, int], list[Record]] = {}
    for d in decisions:
        before.setdefault((d.set, d.shots), []).extend(old.calibrate([Record(d.answered, d.label, key(d))]))
    prev = loo(decisions, FITS[PREVIOUS_FIT])
    now = loo(decisions, FITS[shipped_fit(MODEL)])
    own = own_examples(decisions, heldout_rows, FITS[shipped_fit(MODEL)])
    lines = ["| set | kind, options | setting | n | accuracy | tickets' fit: ECE, right at p ≥ 0.7 | one temperature "
             "(left out) | **now** (left out) | now + the question's own examples | ECE a calibrated model reads here |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    kinds = {d.set: (d.kind, len(d.answered)) for d in decisions}
    for (s, shots), recs in sorted(now.items(), key=lambda k: (k[0][1], k[0][0])):
        cells = [s, f"{kinds[s][0]}, {kinds[s][1]}", SETTINGS[shots], str(len(recs)), f"{metrics(recs).accuracy:.1%}",
                 _cell(before[(s, shots)]), _cell(prev[(s, shots)]), _cell(recs), _cell(own.get((s, shots))),
                 f"{ece_floor(recs):.3f}"]
        lines.append("| " + " | ".join(cells) + " |")

    def pooled(groups: dict[tuple[str, int], list[Record]]) -> list[Record]:
        return [r for rs in groups.values() for r in rs]

    mixed = [r for k, rs in now.items() for r in (own.get(k) or rs)]
    lines.append(f"| **all** | | | {len(pooled(now))} | {metrics(pooled(now)).accuracy:.1%} | {_cell(pooled(before))} | "
                 f"{_cell(pooled(prev))} | {_cell(pooled(now))} | {_cell(mixed)} | |")
    return "\n".join(lines)


def write_shipped(decisions: Sequence[Decision], model: str) -> Path:
    """The shipped form fitted on every set, in the shipped file (its gate: 95% precision, Wilson margin)."""
    never = held_out_sets()
    cal = FITS[shipped_fit(model)]([record(d) for d in decisions if d.answered and d.set not in never])
    cal.thresholds = {k: v for k, v in cal.thresholds.items() if k in cal.temperatures}  # the gates it can use
    cal._report = None  # noqa: SLF001 - the file holds the fit, not its in-sample report
    out = SHIPPED / f"{model}.json"
    cal.save(out)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--write", action="store_true", help="write the shipped calibration (fitted on every set), only")
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="the model whose runs are read and fitted")
    ap.add_argument("--doc", action="store_true", help="print docs/quality.md's table only")
    ap.add_argument("--summary", nargs="*", default=None, metavar="FIT",
                    help="one line per fit (default: every fit), judged left out; nothing else")
    args = ap.parse_args(argv)
    global MODEL
    MODEL = args.model  # the debias strength per kind of this model (models.py), and only its runs
    found, rows, args.raw = load_runs(args.raw, MODEL)  # runs only; a later file's item replaces an earlier one's
    decisions = [d for d in found if d.answered]
    if args.write:  # the tables take minutes; --summary and --doc print them
        print(f"wrote {write_shipped(decisions, args.model)}")
        return 0
    if args.summary is not None:
        print(summary(decisions, args.summary))
        return 0
    if args.doc:
        print(doc_table(decisions, rows))
        return 0
    print(table(decisions))
    print("\nDebias per kind (calibration: T + top per kind, fitted left out):\n")
    print(debias_table(decisions))
    _ = GLOBAL
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
