"""Offline: a noul's examples prior when it rests on two answers (one example per option), judged
leave-one-dataset-out (issue 32, H4 session 14).

With one example per option a noul's examples prior is the mean of two held-out answers, each example asked
with only the other option's example (``priors.held_out``): a prompt that shows one option, not the question's.
Over every saved 1.5B noul run with one example per option (``heldout.py --shots 1``: the raw answer and the
whole examples prior saved per item, so any prior form is exact offline: answered = raw / prior^s, the engine's
floors), each set's right answers under today's form (the examples prior at ``DEBIAS_STRENGTH``: half) and
under candidate forms:

- ``off``: no prior (strength 0; also no labelled answers for the question's own calibration);
- ``today or off``: the two, chosen per leave-out;
- ``shrink m, s``: the examples prior shrunk toward uniform by the answers it rests on, (k·p + m·u)/(k + m)
  (k = 2 here), then raised to s (0.5 or 1);
- ``cf0 s``: a proxy, the zero-shot prompt's content-free prior (no examples shown; from the same files'
  zero-shot answers), raised to s;
- ``cf s``: the content-free prior of the question's own prompt (examples shown, states ``N/A``, ``""``,
  ``[MASK]``), raised to s, where a ``--content-free`` file (``h4-cf-ex1-15.json``) holds it;
- ``cf+ex m, s``: the examples prior shrunk toward that content-free prior instead of uniform.

A family with a parameter (m or s) is judged leave-one-dataset-out: each set by the parameter with the most right
answers on the *other* five (a tie: the smaller change from today). Each set's difference from today is paired
(items right under one only: b lost, c gained; the exact two-sided sign test); pooled the same over all items.
The last line, ``any form above``, chooses among every form of every family per leave-out: picking the family
after seeing every set is a choice too, and this line judges it held out.

    python bench/heldout_examples_prior.py bench/heldout_runs/qwen15-32a.json.gz bench/heldout_runs/qwen15-32c1.json.gz \
        bench/heldout_runs/h3-ex1-15.json.gz bench/heldout_runs/h3-ex1b-15.json.gz \
        --content-free bench/heldout_runs/h4-cf-ex1-15.json
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from heldout import Decision  # noqa: E402
from heldout_load import load_runs  # noqa: E402
from heldout_strength import sign_p  # noqa: E402

from jev_shared.models import debias_strength  # noqa: E402
from jev_shared.priors import powered  # noqa: E402
from jev_shared.readout import divide_prior  # noqa: E402

MODEL = "qwen2.5-coder-1.5b"
#: The answers a noul's examples prior rests on with one example per option.
ANSWERS = 2
#: m = 0 is today's form (s = 0.5) or the whole prior (s = 1); m = inf is no prior at all.
SHRINK = (0, 1, 2, 4, 8, 16, float("inf"))
STRENGTHS = (0.5, 1.0)
Form = Callable[[Decision], "list[float] | None"]


def right(d: Decision, prior: list[float] | None) -> bool:
    raw = list((d.raw or d.answered).values())
    probs = divide_prior(raw, prior) if prior else raw
    return list(d.answered)[max(range(len(probs)), key=probs.__getitem__)] == d.label


def toward(p: Sequence[float], target: Sequence[float], m: float, k: int = ANSWERS) -> list[float]:
    """``p`` (a mean of k answers) shrunk toward ``target`` as if m more answers had read ``target``."""
    return list(target) if m == float("inf") else [(k * a + m * b) / (k + m) for a, b in zip(p, target)]


def uniform(d: Decision) -> list[float]:
    return [1 / len(d.answered)] * len(d.answered)


def families(cf: dict[str, list[float]], cf0: dict[str, list[float]]) -> dict[str, dict[str, Form]]:
    """name -> {parameter label -> form}; a family of one form has no parameter to choose."""
    today = debias_strength(MODEL, "noul", True)
    fams: dict[str, dict[str, Form]] = {
        "today": {f"ex^{today:g}": lambda d: powered(d.prior, today)},
        "off": {"none": lambda d: None},
        "whole": {"ex^1": lambda d: powered(d.prior, 1.0)},
        "today or off": {f"ex^{today:g}": lambda d: powered(d.prior, today), "none": lambda d: None},
    }
    for s in STRENGTHS:  # one family per strength: m chosen per leave-out
        fams[f"shrink, s {s:g}"] = {f"m{m:g}": (lambda d, m=m, s=s: powered(toward(d.prior, uniform(d), m), s))
                                    for m in SHRINK}
    if cf0:
        fams["cf0"] = {f"s{s:g}": (lambda d, s=s: powered(cf0[d.set], s)) for s in STRENGTHS}
    if cf:
        fams["cf"] = {f"s{s:g}": (lambda d, s=s: powered(cf[d.set], s)) for s in STRENGTHS}
        for s in STRENGTHS:
            fams[f"cf+ex, s {s:g}"] = {f"m{m:g}": (lambda d, m=m, s=s: powered(toward(d.prior, cf[d.set], m), s))
                                       for m in SHRINK}
    return fams


def judge(by_set: dict[str, list[Decision]], fams: dict[str, dict[str, Form]]) -> list[str]:
    sets = sorted(by_set)
    today = next(iter(fams["today"].values()))
    base = {n: [right(d, today(d)) for d in by_set[n]] for n in sets}
    lines = ["| form | " + " | ".join(f"{n} ({len(by_set[n])})" for n in sets) + " | pooled | b lost / c gained, p |",
             "|---|" + "---|" * (len(sets) + 2)]
    for name, forms in fams.items():
        hits = {lab: {n: [right(d, f(d)) for d in by_set[n]] for n in sets} for lab, f in forms.items()}
        labels = list(forms)
        cells, lost, gained, total = [], 0, 0, 0
        for n in sets:
            others = [o for o in sets if o != n]
            pick = max(labels, key=lambda lab: (sum(sum(hits[lab][o]) for o in others), -labels.index(lab)))
            got = hits[pick][n]
            b = sum(x and not y for x, y in zip(base[n], got))
            c = sum(y and not x for x, y in zip(base[n], got))
            lost, gained, total = lost + b, gained + c, total + sum(got)
            flag = " **lower, p<0.05**" if c < b and sign_p(b, c) < 0.05 else ""
            chosen = f" [{pick}]" if len(labels) > 1 else ""
            cells.append(f"{sum(got)}{chosen} ({c - b:+d}, p {sign_p(b, c):.2f}){flag}")
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {total} | {lost} / {gained}, p {sign_p(lost, gained):.3f} |")
    return lines


def in_sample(by_set: dict[str, list[Decision]], fams: dict[str, dict[str, Form]]) -> list[str]:
    """Every parameter's right answers per set (no choosing): what a leave-out picks from."""
    sets = sorted(by_set)
    out = ["| form | " + " | ".join(sets) + " | pooled |", "|---|" + "---|" * (len(sets) + 1)]
    for name, forms in fams.items():
        for lab, f in forms.items():
            per = [sum(right(d, f(d)) for d in by_set[n]) for n in sets]
            out.append(f"| {name} {lab} | " + " | ".join(map(str, per)) + f" | {sum(per)} |")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("raw", type=Path, nargs="+")
    ap.add_argument("--content-free", type=Path, default=None,
                    help="JSON {set: [prior...]} of each set's content-free prior with its examples shown")
    ap.add_argument("--all", action="store_true", help="also every parameter's in-sample right answers")
    args = ap.parse_args(argv)
    found, _, paths = load_runs(args.raw, MODEL)
    ds = [d for d in found if d.kind == "noul" and d.shots == 1 and d.prior and d.answered]
    by_set: dict[str, list[Decision]] = {}
    for d in ds:
        by_set.setdefault(d.set, []).append(d)
    cf = {k: v for k, v in json.loads(args.content_free.read_text())["priors"].items() if k in by_set} \
        if args.content_free else {}
    if cf and set(cf) != set(by_set):
        by_set = {n: v for n, v in by_set.items() if n in cf}
    cf0 = {d.set: d.prior for d in found if d.kind == "noul" and d.shots == 0 and d.prior and d.set in by_set}
    if cf0 and set(cf0) != set(by_set):
        cf0 = {}
    print(f"{MODEL}, nouls with one example per option: {len(ds)} answers from {', '.join(p.name for p in paths)}")
    fams = families(cf, cf0)
    # the honest judge of a pick among the families: every form a candidate, chosen per leave-out (today first)
    fams["any form above"] = {f"{name} {lab}": f for name, forms in fams.items() for lab, f in forms.items()}
    print("\n".join(judge(by_set, fams)))
    if args.all:
        print()
        print("\n".join(in_sample(by_set, fams)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
