"""``jev calibrate`` from a question's own traffic: states with no label, and labels where there are some.

Lines ``{"state": ...}`` (no label) are answered now, uncalibrated, and each question's lean over them is
divided out (``calibration.traffic``); lines with a label too (a state and its label, or ``jev decide --label``'s
lines) add a temperature fitted after the offsets. It prints what each step buys on the labelled lines (held
out: each half judged by a fit on the other half) and how many more states or labels would tighten the fit,
and writes one calibration file that ``Calibrator.load``, ``jev decide --calibration`` and ``jev serve
--calibration`` read alike.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from typing import Any

from jev_shared.calibration import MIN_STATES, Calibrator, Record, ece_band, fit_traffic, metrics, states_short

from .backends import backends, memory, read_questions, sync_client

Numbered = Sequence[tuple[int, dict[str, Any]]]
#: Below this many labelled answers a question's temperature is not fitted (offsets alone).
MIN_LABELS = 20


def wanted(numbered: Numbered, args: argparse.Namespace) -> bool:
    """The traffic fit runs on ``--traffic``, or wherever a line holds a state with no label; never on a file of
    recorded answers (``probabilities``: answered under a calibration it does not name), whose lines are checked
    as such."""
    if any("probabilities" in row for _, row in numbered):
        return False
    return bool(getattr(args, "traffic", False)) or any(
        "state" in row and "label" not in row and not row.get("labels") for _, row in numbered)


def run_traffic(args: argparse.Namespace, numbered: Numbered) -> int:
    """Answer the states (uncalibrated), fit, report, write ``--out``: the exit status."""
    try:
        answers, records = _answered(args, numbered)
    except (OSError, ValueError, KeyError) as exc:
        print(f"jev calibrate: {exc}", file=sys.stderr)
        return 2
    short = states_short(answers)
    if len(short) == len(answers):
        need = ", ".join(f"{q}: {n} more" for q, n in short.items())
        print(f"jev calibrate: a question's lean needs at least {MIN_STATES} of its states ({need})", file=sys.stderr)
        return 2
    cal = fit_traffic(answers, records, min_labels=MIN_LABELS, target=args.target, shrink=args.shrink)
    try:
        cal.save(args.out)
    except OSError as exc:
        print(f"jev calibrate: --out {args.out}: cannot write it ({exc.strerror or exc})", file=sys.stderr)
        return 2
    for line in report(answers, records, cal, args.shrink):
        print(line)
    print(f"wrote {args.out} (use SystemOneClient(..., calibrator=Calibrator.load({str(args.out)!r})), "
          f"jev decide --calibration {args.out}, jev serve --calibration {args.out})")
    return 0


def _answered(args: argparse.Namespace, numbered: Numbered) -> tuple[dict[str, list[dict[str, float]]], list[Record]]:
    """Each question's uncalibrated answers (its lean's material) and the labelled ones as records."""
    from jev_shared.batch.labels import labelled_records

    answers: dict[str, list[dict[str, float]]] = {}
    records: list[Record] = []
    states = []
    for n, row in numbered:
        if "answers" in row and row.get("labels") and row.get("shipped_calibration") is not None:
            if "state" not in row:
                raise ValueError(f"{args.labelled}:{n}: this jev decide --label line's answers went through the "
                                 f"calibration shipped for {row['shipped_calibration']!r}, and the lean is the model's "
                                 "own: decide with --keep-states too (its states are asked again), or calibrate "
                                 "without --traffic")
            states += [(n, {"state": row["state"], "label": label, "question_id": qid})
                       for qid, label in row["labels"].items()]
        elif "answers" in row and row.get("labels"):  # jev decide --label, a model with no shipped calibration
            for r in labelled_records(row):
                answers.setdefault(r.question_id, []).append(r.probabilities)
                records.append(r)
        elif "state" in row and not ("answers" in row and row.get("error")):  # a state, or jev decide --keep-states
            states.append((n, {k: v for k, v in row.items() if k in ("state", "label", "question_id")}))
        elif "answers" not in row:
            raise ValueError(f"{args.labelled}:{n}: the traffic fit reads states (with or without a label), "
                             "jev decide --label's lines and jev decide --keep-states' lines")
    if states:
        _answer(args, states, answers, records)
    return answers, records


def _answer(args: argparse.Namespace, states: Numbered, answers: dict[str, list[dict[str, float]]],
            records: list[Record]) -> None:
    from jev_shared import SystemOneClient

    if not args.questions:
        raise ValueError("lines with a state need --questions")
    questions = read_questions(args.questions)
    for n, row in states:
        qid = row.get("question_id", next(iter(questions)))
        if qid not in questions:
            raise ValueError(f"{args.labelled}:{n}: question_id {qid!r} is not one of --questions {list(questions)}")
    with ExitStack() as stack:
        backend = next(iter(backends(args, stack, "calibrate").values()))
        client = SystemOneClient(sync_client(backend), model=backend.model, api=backend.api, calibrator=None,
                                 memory=memory(args))
        for i, (_, row) in enumerate(states):
            asked = _asked(row, questions)
            resp = client.system_one(row["state"], {qid: questions[qid] for qid in asked})
            for qid in asked:
                answer = resp.answers[qid]
                record = Record.from_answer(answer, row["label"] if "label" in row else _any_key(answer), qid)
                answers.setdefault(qid, []).append(record.probabilities)
                if "label" in row:
                    records.append(record)
            print(f"\r{i + 1}/{len(states)} answered", end="", file=sys.stderr)
        print(file=sys.stderr)


def _asked(row: Mapping[str, Any], questions: Mapping[str, Any]) -> list[str]:
    """A state's questions: its ``question_id``; with a label and none, the first; with neither, every one."""
    if "question_id" in row:
        return [row["question_id"]]
    return [next(iter(questions))] if "label" in row else list(questions)


def _any_key(answer: Any) -> str | bool:
    """A placeholder label for reading an unlabelled answer's distribution (the label is not kept)."""
    return True if answer.type == "noul" else ("0" if answer.type == "score" else answer.choice)


def report(answers: Mapping[str, Sequence[Mapping[str, float]]], records: Sequence[Record],
           cal: Calibrator, shrink: float = 0.0) -> list[str]:
    """Per question: the lean divided out and the answers it turns; with labels, each step held out."""
    lines = []
    for qid, dists in answers.items():
        if qid not in cal.biases:
            lines.append(f"{qid}: {len(dists)} states, {MIN_STATES - len(dists)} more needed for its lean; unchanged")
            continue
        lean = {k: sum(d[k] for d in dists) / len(dists) for k in dists[0]}
        turned = sum(_top(d) != _top(cal._temper(d, qid)) for d in dists)
        lines.append(f"{qid}: {len(dists)} states; lean " + ", ".join(f"{k} {p:.2f}" for k, p in lean.items())
                     + f" divided out; {turned} of {len(dists)} answers change")
        mine = [r for r in records if r.question_id == qid]
        lines += _labelled_lines(qid, dists, mine, shrink)
    return lines


def _labelled_lines(qid: str, dists: Sequence[Mapping[str, float]], mine: Sequence[Record],
                    shrink: float = 0.0) -> list[str]:
    if len(mine) < MIN_LABELS:
        more = max(MIN_LABELS - len(mine), 0)
        return [f"  {len(mine)} labelled: {more} more labels would fit its temperature and judge the fit"]
    halves = [list(mine[0::2]), list(mine[1::2])]
    judged: dict[str, list[Record]] = {"as answered": [], "lean divided": [], "labels only": [], "both": []}
    for k in (0, 1):
        fit_on, judge = halves[1 - k], halves[k]
        traffic = fit_traffic({qid: list(dists)}, fit_on, min_labels=len(fit_on) + 1)
        both = fit_traffic({qid: list(dists)}, fit_on, min_labels=1, shrink=shrink)
        labels = Calibrator.fit(fit_on, min_records=1, shrink=shrink)
        judged["as answered"] += judge
        judged["lean divided"] += traffic.calibrate(judge)
        judged["labels only"] += labels.calibrate(judge)
        judged["both"] += both.calibrate(judge)
    out = [f"  {len(mine)} labelled, each half judged by a fit on the other: accuracy / ECE (a perfectly calibrated "
           "model's, 9 times in 10) / log loss"]
    for name, recs in judged.items():
        m = metrics(recs)
        out.append(f"    {name:<12} {m.accuracy:.1%} / {m.ece:.3f} ({ece_band(recs):.3f}) / {_log_loss(recs):.3f}")
    if len(mine) < 150:
        out.append(f"  an ECE at {len(mine)} answers is mostly noise; {150 - len(mine)} more labels bring it to 150, "
                   "where decision sets cover within about 3 points")
    return out


def _log_loss(records: Sequence[Record]) -> float:
    return -sum(math.log(max(r.probabilities[r.label], 1e-9)) for r in records) / len(records)


def _top(d: Mapping[str, float]) -> str:
    return max(d, key=lambda k: d[k])
