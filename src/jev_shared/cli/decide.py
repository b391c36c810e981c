"""``jev decide``: one decision from the shell (``--state``), or a file of them (``--input``, a batch)."""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import ExitStack
from typing import Any

from jev_shared import Options

from .backends import add_backend_args, backends, memory, read_questions, read_state, shown_url, sync_client
from .calibration_file import add_calibration_arg, calibration_kwargs
from .checks import seconds, text
from .decide_batch import add_batch_args


def add_decide(sub: Any) -> None:
    p = sub.add_parser("decide", help="answer typed questions about one state, or a file of them (--input)",
                       description="One decision from the shell: prints the System One answer as JSON. "
                                   "With --input, a file of states into a resumable JSONL log (docs/batch.md).")
    p.add_argument("--state", type=text, help="the state: text, JSON, @file, or - for stdin")
    p.add_argument("--questions", required=True, type=text, help="a JSON object id -> question, or a path to one")
    add_backend_args(p)
    p.add_argument("--layout", default="state_last", choices=Options.choices("layout"),
                   help="where the state goes in the prompt")
    p.add_argument("--timeout", type=seconds, default=None, help="the call's total timeout (seconds)")
    p.add_argument("--order", default=Options.default("order"), choices=Options.choices("order"),
                   help="listed: each question asked once; both: each choice also with its options and examples "
                        "reversed (a yes/no with examples: its examples), the two readings combined (one more call per "
                        "such question); auto: so for a choice with examples on the embedded model")
    add_calibration_arg(p)
    add_batch_args(p)


def run_decide(args: argparse.Namespace) -> int:
    if (args.state is None) == (args.input is None):
        print("jev decide: give --state (one decision) or --input FILE (a batch), not both", file=sys.stderr)
        return 2
    if args.label and args.input is None:
        print("jev decide: --label names a column of --input's rows; one --state has none", file=sys.stderr)
        return 2
    if args.input is not None:
        from .decide_batch import run_batch

        return run_batch(args)

    from jev_shared import JevError, ProviderError, SystemOneClient, wire_error

    with ExitStack() as stack:
        try:
            questions, state = read_questions(args.questions), read_state(args.state)
            calibration = calibration_kwargs(args)
        except (OSError, ValueError) as exc:
            print(json.dumps({"error": {"type": "invalid_request", "message": str(exc)}}), file=sys.stderr)
            return 2
        backend = next(iter(backends(args, stack).values()))
        client = SystemOneClient(sync_client(backend),
                                 model=backend.model, api=backend.api, layout=args.layout, memory=memory(args),
                                 order=args.order, **calibration)
        try:
            resp = client.system_one(state, questions, timeout=args.timeout)
        except JevError as exc:
            err = wire_error(exc)
            if isinstance(exc, ProviderError) and exc.status_hint >= 500:  # name the backend that failed
                err["backend"] = shown_url(backend.base_url)
                err["message"] += f" (backend {err['backend']})"
            print(json.dumps({"error": err}), file=sys.stderr)
            return 2 if exc.status_hint < 500 else 1
        print(json.dumps(resp.model_dump(mode="json", exclude={"debug"}), indent=2))
    return 0
