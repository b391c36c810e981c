"""The ``jev`` subcommands: ``serve`` (the gateway) and ``decide`` (one decision from the shell).

Each command is ``add_<name>(subparsers)`` plus ``run_<name>(args) -> int``; :mod:`jev_shared.cli`
lists them, so a new command is one entry there. Nothing heavy is imported until a command runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from .config import Backend, GatewayConfig, is_loopback, load_keys


def add_backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend-url", help="an OpenAI-compatible base URL (e.g. http://gpu:8000/v1); "
                                         "without it, the embedded model (LocalServer()) is started")
    p.add_argument("--model", action="append", default=None,
                   help="the backend's model name (repeat to serve several on one backend)")
    p.add_argument("--backend-api", default="chat_completions", choices=("chat_completions", "responses", "auto"),
                   help="the engine surface toward the backend (default: chat_completions)")


def backends(args: argparse.Namespace, stack: ExitStack) -> dict[str, Backend]:
    """The configured backend, or the embedded model started inside ``stack``."""
    if args.backend_url:
        if not args.model:
            raise SystemExit("jev: --backend-url needs --model NAME")
        key = os.environ.get("JEV_BACKEND_API_KEY") or os.environ.get("OPENAI_API_KEY") or "unused"
        return {m: Backend(args.backend_url, m, key, args.backend_api) for m in args.model}
    from jev_shared.local import LocalServer

    srv = stack.enter_context(LocalServer(args.model[0]) if args.model else LocalServer())
    print(f"jev: embedded model {srv.model} at {srv.base_url}", file=sys.stderr)
    return {srv.model: Backend(srv.base_url, srv.model, "local", args.backend_api)}


def add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the System One gateway (POST /v1/systemone)",
                       description="Serve POST /v1/systemone over an OpenAI-compatible backend or the embedded model.")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    add_backend_args(p)
    p.add_argument("--api-key-file", help="bearer keys, one a line (also: $JEV_API_KEYS, comma-separated)")
    p.add_argument("--max-body-bytes", type=int, default=1_000_000)
    p.add_argument("--max-in-flight", type=int, default=64, help="requests answered at once; more get 429")
    p.add_argument("--timeout", type=float, default=60.0, help="a request's total timeout unless it sets one")
    p.add_argument("--layout", default="state_last", choices=("state_last", "split", "fused"))
    p.add_argument("--max-concurrency", type=int, default=8, help="questions of one request in flight at once")
    p.add_argument("--max-retries", type=int, default=3, help="engine retries of transient backend faults")
    p.add_argument("--method", default="auto", choices=("auto", "logprobs", "grammar", "structured", "discrete"),
                   help="the engine's readout (default auto: logprobs where the backend returns them)")
    p.add_argument("--log-level", default="info")


def run_serve(args: argparse.Namespace) -> int:
    keys = load_keys(args.api_key_file)
    if not keys and not is_loopback(args.host):
        print(f"jev serve: refusing to serve {args.host} without API keys; set JEV_API_KEYS or --api-key-file "
              "(or serve on 127.0.0.1)", file=sys.stderr)
        return 2
    import uvicorn

    from .app import create_app
    from .logs import configure_logging

    with ExitStack() as stack:
        config = GatewayConfig(backends=backends(args, stack), api_keys=keys, max_body_bytes=args.max_body_bytes,
                               max_in_flight=args.max_in_flight, default_timeout_s=args.timeout, layout=args.layout,
                               max_concurrency=args.max_concurrency, max_retries=args.max_retries,
                               method=args.method)
        configure_logging(args.log_level)
        if not keys:
            print(f"jev serve: no API keys configured: serving loopback only ({args.host}), without authentication",
                  file=sys.stderr)
        print(f"jev serve: http://{args.host}:{args.port}/v1/systemone, models {list(config.backends)}",
              file=sys.stderr)
        uvicorn.run(create_app(config), host=args.host, port=args.port, log_level=args.log_level,
                    access_log=False, log_config=None)
    return 0


def add_decide(sub: Any) -> None:
    from jev_shared.batch_cli import add_batch_args

    p = sub.add_parser("decide", help="answer typed questions about one state, or a file of them (--input)",
                       description="One decision from the shell: prints the System One answer as JSON. "
                                   "With --input, a file of states into a resumable JSONL log (docs/batch.md).")
    p.add_argument("--state", help="the state: text, JSON, @file, or - for stdin")
    p.add_argument("--questions", required=True, help="a JSON object id -> question, or a path to one")
    add_backend_args(p)
    p.add_argument("--layout", default="state_last", choices=("state_last", "split", "fused"))
    p.add_argument("--timeout", type=float, default=None, help="the call's total timeout (seconds)")
    add_batch_args(p)


def _read_text(value: str) -> str:
    if value == "-":
        return sys.stdin.read()
    if value.startswith("@"):
        return Path(value[1:]).read_text()
    return value


def _state(value: str) -> Any:
    """Text stays text; a JSON object, list or chat turns is parsed."""
    text = _read_text(value)
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _questions(value: str) -> Any:
    text = value if value.lstrip().startswith("{") else Path(value).read_text()
    return json.loads(text)


def run_decide(args: argparse.Namespace) -> int:
    if (args.state is None) == (args.input is None):
        print("jev decide: give --state (one decision) or --input FILE (a batch), not both", file=sys.stderr)
        return 2
    if args.input is not None:
        from jev_shared.batch_cli import run_batch

        return run_batch(args)
    import openai

    from jev_shared import JevError, SystemOneClient

    from .errors import from_exception

    with ExitStack() as stack:
        try:
            questions, state = _questions(args.questions), _state(args.state)
        except (OSError, ValueError) as exc:
            print(json.dumps({"error": {"type": "invalid_request", "message": str(exc)}}), file=sys.stderr)
            return 2
        backend = next(iter(backends(args, stack).values()))
        client = SystemOneClient(openai.OpenAI(base_url=backend.base_url, api_key=backend.api_key),
                                 model=backend.model, api=backend.api, layout=args.layout)
        try:
            resp = client.system_one(state, questions, timeout=args.timeout)
        except JevError as exc:
            err = from_exception(exc)
            print(json.dumps(err.body()), file=sys.stderr)
            return 2 if err.status < 500 else 1
        print(json.dumps(resp.model_dump(mode="json", exclude={"debug"}), indent=2))
    return 0
