"""``jev decide --input states.jsonl|.csv --questions questions.json --output answers.jsonl``.

The batch form of ``jev decide``: every state of a file against the same questions, answers
appended to a JSONL log as they finish (so a rerun resumes where a killed run stopped), a progress
bar, a cost preview (``--dry-run``), a summary and a review queue of unsure choices.

Exit status: 0 when every item of the run was answered, 1 when some failed (each failure is in
the log with its error), 2 for bad input (nothing sent; an ``--output`` that cannot be a log is bad
input), 74 when the log could not be written mid-run (a full disk: what was written stays, rerun to
resume), 130 when interrupted (rerun to resume).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from jev_shared import Options
from jev_shared.batch.report import REVIEW_THRESHOLD

from .checks import positive_int, text, unit

#: Items in flight unless --concurrency says otherwise: the embedded server's slot count.
DEFAULT_CONCURRENCY = 4
#: The exit status when the answer log cannot be written mid-run (sysexits' EX_IOERR).
EXIT_LOG_WRITE = 74


def add_batch_args(p: argparse.ArgumentParser) -> None:
    """The batch flags of ``jev decide`` (``--input`` switches it from one state to a file of them)."""
    g = p.add_argument_group("batch (--input)")
    g.add_argument("--input", type=text,
                   help="states to decide: .jsonl ({\"id\", \"state\"} a line) or .csv (see --column)")
    g.add_argument("--output", type=text, help="the answer log (JSONL, appended; a rerun skips the ids already in it)")
    g.add_argument("--column", type=text,
                   help="the CSV column (or JSONL key) holding the state (without it: 'state', else 'text')")
    g.add_argument("--id-column", default="id", type=text,
                   help="the column (or key) holding the id (without it: row numbers, or a JSONL file's line numbers)")
    g.add_argument("--label", action="append", type=text, metavar="[QUESTION_ID=]COLUMN",
                   help="the column (or key) holding each row's true answer, written on its line for jev calibrate: "
                        "an option's name, a level's index, true/false; QUESTION_ID= where there are several "
                        "questions (repeat the flag for each); jev calibrate then fits on top of the calibration the "
                        "model ships, which the answers went through (the line names it)")
    g.add_argument("--keep-states", action="store_true",
                   help="write each row's state on its line too, so jev calibrate can measure each question's lean "
                        "over the states this run saw (no label needed); off by default: the log then holds your data")
    g.add_argument("--concurrency", type=positive_int, default=DEFAULT_CONCURRENCY, help="items in flight at once")
    g.add_argument("--method", default=Options.default("method"), choices=Options.choices("method"),
                   help="the engine's readout (auto learns; logprobs pins it for vLLM, SGLang, llama.cpp)")
    g.add_argument("--dry-run", action="store_true", help="print the request count and a token estimate; send nothing")
    g.add_argument("--retry-failed", action="store_true", help="decide again the ids whose logged line is an error")
    g.add_argument("--review-threshold", type=unit, default=REVIEW_THRESHOLD,
                   help="choice answers below this confidence go to the review queue")
    g.add_argument("--review", type=text, help="the review queue file (without it: OUTPUT's name with .review.jsonl)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")


def _fail(kind: str, message: str, **extra: Any) -> int:
    print(json.dumps({"error": {"type": kind, "message": message, **extra}}), file=sys.stderr)
    return 2


def review_path(args: argparse.Namespace) -> Path:
    if args.review:
        return Path(args.review)
    out = Path(args.output)
    return out.with_name(out.name.removesuffix(".jsonl") + ".review.jsonl")


class PlainProgress:
    """The progress line without tqdm: done/total, rate and ETA, at most every ``every_s`` seconds."""

    def __init__(self, total: int, initial: int, every_s: float = 2.0) -> None:
        self.total, self.n, self.start_n = total, initial, initial
        self.every_s, self.started, self.last, self.failed = every_s, time.monotonic(), 0.0, 0

    def update(self, n: int = 1) -> None:
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.every_s or self.n >= self.total:
            self.last = now
            rate = (self.n - self.start_n) / max(now - self.started, 1e-9)
            eta = (self.total - self.n) / rate if rate > 0 else float("inf")
            print(f"jev decide: {self.n}/{self.total} {rate:.2f} item/s ETA {eta:.0f}s, {self.failed} failed",
                  file=sys.stderr, flush=True)

    def set_postfix(self, failed: int, refresh: bool = False) -> None:
        self.failed = failed

    def close(self) -> None:
        pass


def make_progress(total: int, initial: int, enabled: bool) -> Any:
    """tqdm's bar (rate and ETA) on stderr when the ``batch`` extra is installed, else a plain line."""
    if not enabled:
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        return PlainProgress(total, initial)
    return tqdm(total=total, initial=initial, unit="item", desc="jev decide", file=sys.stderr,
                mininterval=0.5 if sys.stderr.isatty() else 5.0,
                smoothing=0.1, dynamic_ncols=True)


def paper_client(args: argparse.Namespace) -> Any:
    """A client for checks and previews only (no I/O): the model by name, no backend started, no memory file."""
    import openai

    from jev_shared import Memory, SystemOneClient
    from jev_shared.local import DEFAULT_MODEL

    model = args.model[0] if args.model else DEFAULT_MODEL
    return SystemOneClient(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused"), model=model,
                           api=args.backend_api, layout=args.layout, method=args.method, memory=Memory())


def _prepare(args: argparse.Namespace) -> tuple[dict[str, Any], list[Any], dict[str, Any], list[Any]] | int:
    """Questions, items, the log so far and what is left to decide; or the exit status of bad input."""
    from jev_shared import InvalidQuestionError, wire_error
    from jev_shared.batch import check_questions
    from jev_shared.batch.files import InputError, check_output, load_questions, read_items, read_log, to_decide
    from jev_shared.batch.labels import labeler

    from .calibration_file import calibration_kwargs

    if not args.output:
        return _fail("invalid_request", "--input needs --output FILE (the answer log)")
    if args.concurrency < 1:
        return _fail("invalid_request", "--concurrency must be at least 1")
    try:
        questions = load_questions(args.questions)
        check_questions(paper_client(args), questions)
        check_output(args.output)
        check_output(review_path(args))
        items = read_items(args.input, column=args.column, id_column=args.id_column,
                           labels=labeler(args.label, questions))
        done = read_log(args.output)
        args.calibration_kwargs = calibration_kwargs(args)  # checked whole before any request
    except InvalidQuestionError as exc:
        print(json.dumps({"error": wire_error(exc)}), file=sys.stderr)
        return 2
    except (OSError, ValueError, InputError) as exc:
        return _fail("invalid_request", str(exc))
    return questions, items, done, to_decide(items, done, retry_failed=args.retry_failed)


def run_batch(args: argparse.Namespace) -> int:
    """Decide every state of ``--input`` not yet in ``--output``; summary on stdout (JSON) and stderr."""
    prepared = _prepare(args)
    if isinstance(prepared, int):
        return prepared
    questions, items, done, todo = prepared
    if args.dry_run:
        return _dry_run(questions, items, todo, args)
    from jev_shared.batch import BatchTotals

    totals = BatchTotals()
    if todo:
        status = _decide(args, questions, items, todo, totals)
        if status:
            return status
    return _finish(args, questions, items, len(items) - len(todo), totals)


def _dry_run(questions: dict[str, Any], items: list[Any], todo: list[Any], args: argparse.Namespace) -> int:
    from jev_shared.batch.files import estimate

    est = estimate(paper_client(args), todo, questions)
    report = {"input": len(items), "skipped": len(items) - len(todo), "to_decide": len(todo), **est}
    print(f"jev decide --dry-run: {len(todo)} of {len(items)} items to decide, {est['requests']} requests, "
          f"~{est['input_tokens']:,} input tokens, {est['output_tokens']:,} output tokens", file=sys.stderr)
    print(json.dumps(report))
    return 0


def _decide(args: argparse.Namespace, questions: dict[str, Any], items: list[Any], todo: list[Any],
            totals: Any) -> int:
    """Run the batch into the log; 130 when interrupted, 74 when the log cannot be written, else 0."""

    from jev_shared import SystemOneClient
    from jev_shared.batch import stream_batch
    from jev_shared.batch.files import AnswerLog

    from .backends import backends, memory, shown_url, sync_client

    with ExitStack() as stack:
        backend = next(iter(backends(args, stack).values()))
        # --calibration's file, or the shipped one (a labelled run's only: jev calibrate fits on top of it)
        client = SystemOneClient(sync_client(backend), model=backend.model, api=backend.api, layout=args.layout,
                                 method=args.method, order=args.order, memory=memory(args), **args.calibration_kwargs)
        shipped = backend.model if args.label and client.calibrator is not None else None
        prepared = client.prepare(questions)  # the one-time costs, before the bar, so its rate is the run's
        print(f"jev decide: {prepared}", file=sys.stderr, flush=True)
        totals.started = time.perf_counter()  # decisions/s counts the run, not the start-up and preparation
        bar = make_progress(len(items), len(items) - len(todo), not args.no_progress)
        try:
            try:
                log = stack.enter_context(AnswerLog(args.output))
                states = [item.state for item in todo]  # a result's index is its item's place in todo
                for result in stream_batch(client, todo, questions, concurrency=args.concurrency, totals=totals,
                                           timeout=args.timeout):
                    if args.keep_states:
                        result.state = states[result.index]
                    result.shipped_calibration = shipped
                    log.write(result)
                    if bar is not None:
                        bar.set_postfix(failed=sum(totals.failed.values()), refresh=False)
                        bar.update(1)
            finally:
                if bar is not None:  # closed (its last draw) before any message below, never drawn under it
                    bar.close()
        except KeyboardInterrupt:
            print(f"\njev decide: interrupted; {totals.answered} answered this run are in {args.output}; "
                  "rerun the same command to resume", file=sys.stderr)
            return 130
        except OSError as exc:
            print(f"\njev decide: cannot write {args.output}: {exc.strerror or exc}; the lines written so far are "
                  "kept; free space (or pick another --output) and rerun the same command to resume", file=sys.stderr)
            return EXIT_LOG_WRITE
        if any(kind.startswith("backend") for kind in totals.failed):
            print(f"jev decide: backend failures from {shown_url(backend.base_url)}", file=sys.stderr)
    return 0


def _finish(args: argparse.Namespace, questions: dict[str, Any], items: list[Any], skipped: int, totals: Any) -> int:
    from jev_shared.batch.files import id_key, read_log
    from jev_shared.batch.report import render_summary, review_rows, summarize, write_review

    records = read_log(args.output)
    summary = summarize(records, questions, totals, n_input=len(items), skipped=skipped,
                        threshold=args.review_threshold)
    path = None
    if summary["below_threshold"]:
        rows = review_rows(records, questions, args.review_threshold, {id_key(i.id): i.state for i in items})
        path = str(review_path(args))
        write_review(path, rows)
        summary["review"] = {"path": path, "rows": len(rows)}
    print(render_summary(summary, path), file=sys.stderr)
    print(json.dumps(summary))
    return 1 if sum(totals.failed.values()) else 0
