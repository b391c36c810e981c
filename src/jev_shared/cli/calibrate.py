"""``jev calibrate labelled.jsonl``: fit a calibration for any model, and say what it buys.

Each line is a labelled answer already recorded (``{"probabilities": {...}, "label": ..., "question_id": ...}``,
as :class:`~jev_shared.calibration.Record` saves it), a line of ``jev decide --input ... --label COLUMN``'s answer
log as it wrote it (its labelled answers; lines without labels or with an error are left out), or a labelled state
to answer now
(``{"state": ..., "label": ...}``, with ``--questions`` and a backend: ``--backend-url`` and ``--model``, or
the embedded model). It prints accuracy and ECE before and after (held out: each half of the lines
is judged by a fit on the other half), the recommended threshold on the calibrated top probability
for ``--target`` precision, and writes the calibration fitted on every line to ``--out``. It also fits
decision sets (:class:`~jev_shared.DecisionSets`, split conformal, ``--coverage``) on the calibrated answers,
prints their held-out coverage, mean set size and the share decided alone, saves them in the same file
(one per question id when the file holds several; ``--randomized``: the boundary drawn so coverage averages
``--coverage`` exactly, its seed printed and saved), and draws the reliability diagram and the set-size
chart as a PNG (``--plot``; the ``plots`` extra).
"""

from __future__ import annotations

import argparse
import json
import math
import secrets
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from jev_shared import DecisionSets, SetReport
from jev_shared.calibration import Calibrator, Record, ece_band, metrics, recommend_threshold
from jev_shared.files import read_text

from . import checks
from .backends import add_backend_args, backends, memory, read_questions, sync_client
from .calibrate_traffic import run_traffic, wanted


def add_calibrate(sub: Any) -> None:
    p = sub.add_parser("calibrate", help="fit a calibration on labelled answers; ECE before/after and a threshold",
                       description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("labelled", type=Path,
                   help="JSON lines: recorded answers, jev decide --label's output as written, or labelled states")
    p.add_argument("--questions", type=checks.text, default=None,
                   help="for states: a JSON object id -> question, or a path to one")
    p.add_argument("--target", type=checks.open_unit, default=0.9, help="the precision the threshold must reach")
    p.add_argument("--bias", action="store_true", help="also fit one offset per option (can change answers)")
    p.add_argument("--top", action="store_true",
                   help="also fit top-label scaling (bends the reliability curve; never changes answers)")
    p.add_argument("--out", type=Path, default=Path("calibration.json"), help="where to write the calibration")
    p.add_argument("--coverage", type=checks.open_unit, default=0.9,
                   help="decision sets: how often the set must hold the true option")
    p.add_argument("--class-conditional", action="store_true",
                   help="decision sets: the coverage for every option's items, not only on average")
    p.add_argument("--randomized", action="store_true",
                   help="decision sets: draw the boundary so coverage averages --coverage exactly (default: the "
                        "conservative boundary, up to 1/(n+1) above); a set's size then depends on that draw")
    p.add_argument("--seed", type=checks.count, default=None,
                   help="with --randomized: the draw's seed, to repeat a fit (default: a fresh one, printed and "
                        "saved; never reuse one seed for every fit, or every fit draws the same side)")
    p.add_argument("--plot", type=Path, default=None,
                   help="the reliability diagram and set-size chart (PNG; default: --out with .png, when "
                        "matplotlib is installed: the 'plots' extra)")
    p.add_argument("--shrink", type=checks.answers, default=SHRINK,
                   help="each temperature pulled toward the answers before it (as the model's shipped calibration "
                        "gives them, for states answered here; else as read), as if this many more answers agreed "
                        "(0: a free fit; thirty answers nearly all right otherwise sharpen every answer)")
    p.add_argument("--traffic", action="store_true",
                   help="divide out each question's lean measured over every answer in the file, labelled or not "
                        "(on by itself where lines hold states with no label), then fit a temperature on the labels")
    add_backend_args(p)


#: ``--shrink``'s default: on the 1.5B's saved public-set runs, 30 labels a set, three draws of them
#: (``python -m bench heldout_traffic --seed 1|2|3``), a temperature pulled toward the model as read as if 10
#: more answers agreed reads a pooled log loss of 0.857 / 0.857 / 0.841, the free fit 0.981 / 0.853 / 0.884, the
#: shipped calibration 0.860 / 0.853 / 0.854.
SHRINK = 10.0


def _answer_states(rows: list[dict[str, Any]], args: argparse.Namespace) -> tuple[list[Record], str | None]:
    """Labelled states → records, answered by the configured backend as the product answers them (through the
    calibration shipped for its model, if any), and that model's name where one calibrated them."""

    from jev_shared import SystemOneClient

    if not args.questions:
        raise SystemExit("jev calibrate: lines with a state need --questions")
    questions = read_questions(args.questions)
    with ExitStack() as stack:
        backend = next(iter(backends(args, stack, "calibrate").values()))
        client = SystemOneClient(sync_client(backend), model=backend.model, api=backend.api, memory=memory(args))
        records = []
        for i, row in enumerate(rows):
            qid = row.get("question_id") or next(iter(questions))
            resp = client.system_one(row["state"], {qid: questions[qid]})
            records.append(Record.from_answer(resp.answers[qid], row["label"], qid))
            print(f"\r{i + 1}/{len(rows)} answered", end="", file=sys.stderr)
        print(file=sys.stderr)
    return records, (backend.model if client.calibrator is not None else None)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The file's JSON lines; a last line cut short (a ``jev decide`` run killed mid-write) is left out."""
    return [row for _, row in numbered_rows(path)]


def numbered_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_rows` with each row's line number."""
    text = read_text(path)
    lines = text.splitlines()
    rows = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            if n == len(lines) and not text.endswith("\n"):
                print(f"jev calibrate: {path}:{n}: a torn last line (a run killed mid-write), left out", file=sys.stderr)
                continue
            raise ValueError(f"{path}:{n}: not JSON ({exc})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: expected a JSON object")
        rows.append((n, row))
    return rows


def read_records(args: argparse.Namespace) -> tuple[list[Record], Calibrator | None]:
    """Recorded answers, jev decide's lines (their labelled answers) and labelled states answered now; and the
    calibration they were answered through, which the fit goes on top of: the one shipped for the model (None for
    recorded lines and for a model that ships none: the file then replaces whatever calibrated them)."""
    numbered = numbered_rows(args.labelled)
    rows = [r for _, r in numbered]
    recorded = [_recorded(r, args.labelled, n) for n, r in numbered if "probabilities" in r]
    decided = [r for r in rows if "answers" in r and "probabilities" not in r]
    numbered_states = [(n, r) for n, r in numbered if "answers" not in r and "probabilities" not in r]
    states = [r for _, r in numbered_states]
    if states:
        _check_states(numbered_states, args)
    from jev_shared.batch.labels import log_records

    logged, logged_model = log_records(decided, args.labelled) if decided else ([], None)
    answered, model = _answer_states(states, args) if states else ([], None)
    models = {m for rs, m in ((recorded, None), (logged, logged_model), (answered, model)) if rs}
    if len(models) > 1:
        raise ValueError(f"{args.labelled}: the answers went through different calibrations (shipped for "
                         f"{', '.join(repr(m) if m else 'none' for m in models)}); calibrate them apart")
    name = next(iter(models), None)
    return recorded + logged + answered, _shipped_for(name, args.labelled) if name else None


def _shipped_for(model: str, path: Path) -> Calibrator:
    """The calibration shipped for ``model``, which its answers went through (a ValueError where none ships here)."""
    from jev_shared.calibration import shipped

    base = shipped(model)
    if base is None:
        raise ValueError(f"{path}: the answers went through the calibration shipped for {model!r}, which this "
                         "install does not ship; calibrate them where they were answered")
    return base


def _recorded(row: dict[str, Any], path: Path, n: int) -> Record:
    """A recorded answer's line as a Record, every value checked (a ValueError naming the line)."""
    if "label" not in row:
        raise ValueError(f"{path}:{n}: no label (the true answer) on this line")
    try:
        return Record.checked(row["probabilities"], row["label"], row.get("question_id", ""))
    except ValueError as exc:
        raise ValueError(f"{path}:{n}: {exc}") from None


def _check_states(numbered: list[tuple[int, dict[str, Any]]], args: argparse.Namespace) -> None:
    """Labelled states checked before any is answered: a label each, a question of --questions (a ValueError)."""
    if not args.questions:
        raise ValueError("lines with a state need --questions")
    questions = read_questions(args.questions)
    for n, row in numbered:
        label, qid = row.get("label"), row.get("question_id")
        if "state" not in row or "label" not in row:
            raise ValueError(f"{args.labelled}:{n}: a line needs probabilities and a label, a state and a label, or "
                             "jev decide's answers")
        if label is None or isinstance(label, (dict, list, float)):
            raise ValueError(f"{args.labelled}:{n}: the label must be a text, a boolean or a level's number, got "
                             f"{label!r}"[:200])
        if qid is not None and (not isinstance(qid, str) or qid not in questions):
            raise ValueError(f"{args.labelled}:{n}: question_id {qid!r} is not one of --questions {list(questions)}"
                             [:200])
        question = questions.get(qid) if qid is not None else next(iter(questions.values()), None)
        if not _label_fits(question, label):
            raise ValueError(f"{args.labelled}:{n}: the label {label!r} is not an answer of its question"[:200])


def _label_fits(question: Any, label: Any) -> bool:
    """Whether ``label`` can be an answer of ``question`` (a wire question; one of another shape is not judged)."""
    if not isinstance(question, dict):
        return True
    kind, criteria = question.get("type"), question.get("criteria")
    if kind == "noul":
        return label in (0, 1) or (isinstance(label, str) and label.strip().lower() in YES_NO)  # True == 1
    if kind == "choice" and isinstance(criteria, dict):
        return isinstance(label, str) and label in criteria
    if kind == "score" and isinstance(criteria, (list, dict)):
        level = str(label) if not isinstance(label, bool) and isinstance(label, (int, str)) else ""
        return level.isdigit() and int(level) < len(criteria)
    return True


#: The texts a yes/no's label may be (besides a boolean): ``Record.from_answer`` reads them.
YES_NO = ("yes", "no", "true", "false")


def held_out(records: list[Record], bias: bool, target: float, top: bool = False,
             shrink: float = 0.0) -> tuple[list[Record], list[Record]]:
    """(records as answered, each calibrated by a fit on the other half): an honest after."""
    halves = [records[0::2], records[1::2]]
    after: list[Record] = []
    for k in (0, 1):
        cal = Calibrator.fit(halves[1 - k], bias=bias, top=top, target=target, min_records=10, shrink=shrink)
        after += cal.calibrate(halves[k])
    return halves[0] + halves[1], after


def run_calibrate(args: argparse.Namespace) -> int:
    if args.seed is not None and not args.randomized:
        print("jev calibrate: argument --seed: needs --randomized (the conservative boundary draws nothing)",
              file=sys.stderr)
        return 2
    if args.randomized and args.seed is None:
        args.seed = secrets.randbelow(1_000_000)  # drawn apart from the answers, as the guarantee needs
    why = unwritable(args.out, "--out") or (unwritable(args.plot, "--plot") if args.plot else None)
    if why:  # before any line is read or answered
        print(f"jev calibrate: {why}", file=sys.stderr)
        return 2
    try:
        if wanted(numbered_rows(args.labelled), args):  # states with no label: the lean over them, divided out
            return run_traffic(args, numbered_rows(args.labelled))
        records, base = read_records(args)
    except (OSError, ValueError, KeyError) as exc:
        print(f"jev calibrate: {exc}", file=sys.stderr)
        return 2
    if len(records) < 4:
        print("jev calibrate: at least 4 labelled lines are needed", file=sys.stderr)
        return 2
    if not 0.0 < args.coverage < 1.0:
        print(f"jev calibrate: --coverage must be strictly between 0 and 1, got {args.coverage}", file=sys.stderr)
        return 2
    try:
        before, after = held_out(records, args.bias, args.target, args.top, args.shrink)
        b, a = metrics(before), metrics(after)
        threshold = recommend_threshold(a, args.target)
        cal = Calibrator.fit(records, bias=args.bias, top=args.top, target=args.target, min_records=10,
                             shrink=args.shrink)
    except (ValueError, ArithmeticError) as exc:
        print(f"jev calibrate: {args.labelled}: no calibration fits these answers ({exc})", file=sys.stderr)
        return 2
    if not written(lambda: cal.on(base).save(args.out), args.out, "--out"):
        return 2
    kept = next((s for s in a.selective if s.threshold == threshold), None)
    print(f"{len(records)} labelled answers" + (" (fitted on top of the calibration shipped for the model, "
                                                 "which the file holds)" if base is not None else ""))
    print(f"accuracy        {b.accuracy:.1%} -> {a.accuracy:.1%}")
    band = ece_band(after)
    print(f"ECE (held out)  {b.ece:.3f} -> {a.ece:.3f} ({'inside' if a.ece <= band else 'outside'} the band of a "
          f"perfectly calibrated model stating these probabilities: up to {band:.3f}, 9 times in 10, on {len(after)} "
          "answers)")
    if threshold is None:
        print(f"threshold       none reaches {args.target:.0%} precision on these answers, with a standard error "
              "to spare")
    else:
        assert kept is not None  # recommend_threshold picks one of a.selective's thresholds
        print(f"threshold       {threshold:.2f} on the calibrated top probability: {kept.accuracy:.1%} precision, "
              f"{kept.coverage:.0%} of answers kept (target {args.target:.0%})")
    print(f"wrote {args.out} (temperature {cal.temperature():.2f}; use SystemOneClient(..., calibrator="
          f"Calibrator.load({str(args.out)!r})))")
    return _sets(records, cal, args, before, after)


def _sets(records: list[Record], cal: Calibrator, args: argparse.Namespace, before: list[Record],
          after: list[Record]) -> int:
    """Decision sets: held-out figures, the fit on every line saved beside the calibration, the PNG."""
    try:
        report, sizes = held_out_sets(records, args)
        final = fit_sets(cal.calibrate(records), args)
    except (ValueError, ArithmeticError) as exc:
        print(f"decision sets   none: {exc}")
        return 0
    print(f"decision sets   at {args.coverage:.0%} (held out): coverage {report.coverage:.1%}, mean set size "
          f"{report.mean_size:.2f}, decided alone {report.decided:.1%} (wrong {report.error_decided:.1%} of those)")
    print(boundary(final, args))
    print(spread_line(min(s.n for s in final.values()), args.coverage))
    if not written(lambda: save_sets(final, args.out), args.out, "--out"):
        return 2
    print(f"                saved in {args.out}: SystemOneClient(..., sets=DecisionSets.load({str(args.out)!r}))")
    from .calibrate_plot import INSTALL_PLOTS, have_matplotlib, write_png

    plot = args.plot or (args.out.with_suffix(".png") if have_matplotlib() else None)
    if plot is None:
        print(f"(for the reliability diagram and set-size chart: {INSTALL_PLOTS})")
        return 0
    why = unwritable(plot, "--plot")
    if why:
        print(f"jev calibrate: {why}", file=sys.stderr)
        return 2
    try:
        write_png(plot, before, after, sizes, report, args.coverage)
    except (RuntimeError, OSError) as exc:
        print(f"jev calibrate: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {plot} (reliability diagram and set sizes, held out)")
    return 0


def spread_line(n: int, coverage: float, within: float = 0.03) -> str:
    """How far one fit's coverage strays from the target with ``n`` labels (the sets' guarantee is an average over
    draws of the labels: one standard deviation of a split-conformal fit's coverage is about sqrt(c(1-c)/(n+2))),
    and how many labels bring that under ``within``."""
    sd = math.sqrt(coverage * (1 - coverage) / (n + 2))
    need = math.ceil(coverage * (1 - coverage) / within**2) - 2
    more = f"{need - n} more labels bring it to ±{within:.0%}" if need > n else f"within ±{within:.0%}"
    return f"spread          one fit's coverage strays about ±{sd:.1%} from {coverage:.0%} at n = {n}; {more}"


def unwritable(path: Path, flag: str) -> str | None:
    """Why ``path`` is no file to write (a symbolic link, whose target would be overwritten; a folder, a FIFO or a
    device; a folder that does not exist), or None."""
    if path.is_symlink():
        return f"{flag} {path}: a symbolic link; name a file (its target is not written through a link)"
    if path.exists() and not path.is_file():
        return f"{flag} {path}: not a regular file (a folder, a FIFO or a device)"
    if not path.parent.is_dir():
        return f"{flag} {path}: no folder {path.parent} to write it in"
    return None


def written(write: Any, path: Path, flag: str) -> bool:
    """``write()`` done, or its OSError (a full disk, no permission) said in one line: False."""
    try:
        write()
    except OSError as exc:
        print(f"jev calibrate: {flag} {path}: cannot write it ({exc.strerror or exc})", file=sys.stderr)
        return False
    return True


def _by_question(records: list[Record]) -> dict[str, list[Record]]:
    groups: dict[str, list[Record]] = {}
    for r in records:
        groups.setdefault(r.question_id, []).append(r)
    return groups


def fit_sets(records: list[Record], args: argparse.Namespace) -> dict[str, DecisionSets]:
    """One DecisionSets per question id, fitted on (calibrated) records (``--randomized``: with ``args.seed``)."""
    return {q: DecisionSets.fit([r.probabilities for r in g], [r.label for r in g], args.coverage,
                                args.class_conditional, randomized=args.randomized, seed=args.seed)
            for q, g in _by_question(records).items()}


def boundary(sets: dict[str, DecisionSets], args: argparse.Namespace) -> str:
    """The report's line on which boundary the sets use, and what it means for their coverage."""
    target = f"{args.coverage:.0%}"
    if args.randomized:
        return (f"boundary        randomized (seed {args.seed}): coverage {target} on average over the draw; set "
                f"sizes depend on it (--randomized --seed {args.seed} repeats it)")
    n = min(s.n for s in sets.values())
    above = ("n: each true option's labelled answers" if args.class_conditional
             else f"{100 / (n + 1):.1f} points at n = {n}")
    return (f"boundary        conservative: coverage at least {target}, up to 1/(n+1) above ({above}); "
            f"--randomized: {target} on average")


def held_out_sets(records: list[Record], args: argparse.Namespace) -> tuple[SetReport, list[int]]:
    """Each half's sets judged by a calibration and sets fitted on the other half: the pooled report and
    every judged answer's set size."""
    halves = [records[0::2], records[1::2]]
    sizes: list[int] = []
    hits = alone = wrong = 0
    for k in (0, 1):
        cal = Calibrator.fit(halves[1 - k], bias=args.bias, top=args.top, target=args.target, min_records=10,
                             shrink=args.shrink)
        sets = fit_sets(cal.calibrate(halves[1 - k]), args)
        for r in cal.calibrate(halves[k]):
            s = sets[r.question_id].of(r.probabilities) if r.question_id in sets else list(r.probabilities)
            sizes.append(len(s))
            hits += r.label in s
            alone += len(s) == 1
            wrong += len(s) == 1 and s[0] != r.label
    n = len(sizes)
    return SetReport(n, hits / n, sum(sizes) / n, alone / n, wrong / max(alone, 1)), sizes


def save_sets(sets: dict[str, DecisionSets], path: Path) -> None:
    """Into the calibration file: the sets alone for one question id, else one per question id."""
    if len(sets) == 1:
        next(iter(sets.values())).save(path)
    else:
        DecisionSets.save_many(sets, path)
