"""``jev serve``: the System One gateway under uvicorn (gunicorn's workers with ``--workers N``), docs/gateway.md."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, TypeVar

from jev_shared import Options
from jev_shared.gateway.config import GatewayConfig, is_loopback, load_keys
from jev_shared.gateway.kept_states import checked_limit, checked_path
from jev_shared.gateway.sets import Calibration, load_calibration

from .backends import MissingExtra, add_backend_args, backends, read_questions
from .checks import count, host, port, positive_int, seconds, text

T = TypeVar("T")
D = GatewayConfig(backends={})  # the documented defaults, read off the config itself


def add_serve(sub: Any) -> None:
    p = sub.add_parser("serve", help="run the System One gateway (POST /v1/systemone)",
                       description="Serve POST /v1/systemone over an OpenAI-compatible backend or the embedded model.")
    p.add_argument("--host", default="127.0.0.1", type=host, help="the address to listen on")
    p.add_argument("--port", type=port, default=8000, help="the port to listen on")
    add_backend_args(p)
    p.add_argument("--api-key-file", type=text, help="bearer keys, one a line (also: $JEV_API_KEYS, comma-separated)")
    p.add_argument("--allowed-host", action="append", default=[], type=host,
                   help="without keys, a Host header to accept besides localhost / 127.0.0.1 / [::1] (repeatable)")
    lim = p.add_argument_group("limits (docs/gateway.md lists each with its error)")
    lim.add_argument("--max-body-bytes", type=positive_int, default=D.max_body_bytes,
                     help="request body bytes, compressed and decoded; more: 413")
    lim.add_argument("--max-questions", type=positive_int, default=D.max_questions,
                     help="questions in one request; more: 422")
    lim.add_argument("--max-in-flight", type=positive_int, default=D.max_in_flight,
                     help="requests answered at once; more: 429")
    lim.add_argument("--max-calls-per-key", type=positive_int, default=D.max_calls_per_key,
                     help="backend calls one key may hold in flight; more: 429")
    lim.add_argument("--max-connections", type=positive_int, default=D.max_connections,
                     help="open client connections and requests (uvicorn's limit_concurrency); more: 503 and closed")
    lim.add_argument("--body-timeout", type=seconds, default=D.body_timeout_s,
                     help="seconds a client has to send a request's body; then 408 and closed")
    lim.add_argument("--keep-alive-timeout", type=seconds, default=D.keep_alive_s,
                     help="seconds an idle keep-alive connection stays open")
    p.add_argument("--timeout", type=seconds, default=D.default_timeout_s,
                   help=f"a request's total timeout (seconds) unless it sets one; a request may ask for at most "
                        f"{D.max_timeout_s:g}")
    p.add_argument("--layout", default=D.layout, choices=Options.choices("layout"),
                   help="where the state goes in the prompt")
    p.add_argument("--max-concurrency", type=positive_int, default=D.max_concurrency,
                   help="questions of one request in flight at once")
    p.add_argument("--max-retries", type=count, default=D.max_retries, help="engine retries of transient backend faults")
    p.add_argument("--method", default=Options.default("method"), choices=Options.choices("method"),
                   help="the engine's readout (auto: logprobs where the backend returns them)")
    p.add_argument("--order", default=Options.default("order"), choices=Options.choices("order"),
                   help="listed: each question asked once; both: each choice also with its options and examples "
                        "reversed (a yes/no with examples: its examples), the two readings combined, so their order "
                        "cannot move the answer (one more call per such question); auto: so for a choice with "
                        "examples on the embedded model")
    p.add_argument("--warm", metavar="QUESTIONS", type=text,
                   help="questions (a JSON file or object) to prepare at start-up: every one-time cost paid before "
                        "/healthz says ready")
    p.add_argument("--calibration", metavar="FILE", type=text,
                   help="the file jev calibrate writes: its calibration replaces the shipped one, and its decision "
                        "sets put decision_set and abstains on the answers they apply to (docs/decisions.md)")
    p.add_argument("--keep-states", metavar="FILE", type=text,
                   help="append each answered request's state to FILE, a line per question ({\"state\": ..., "
                        "\"question_id\": ...}), for jev calibrate FILE --questions Q (docs/gateway.md)")
    lim.add_argument("--keep-states-max-bytes", type=positive_int, default=D.keep_states_max_bytes,
                     help="the most bytes --keep-states writes; then it keeps no more (logged once)")
    p.add_argument("--workers", type=positive_int, default=1,
                   help="gateway processes on one socket (gunicorn's UvicornWorker, POSIX); memory file shared, "
                        "metrics and limits per worker; at most 2 a core and one per 128 MiB of available memory")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="the gateway's log level")


def _config(args: argparse.Namespace, keys: frozenset[str], warm: Any, stack: ExitStack,
            calibration: Calibration | None = None, kept: Path | None = None) -> GatewayConfig:
    return GatewayConfig(
        backends=backends(args, stack, "serve"), api_keys=keys, max_body_bytes=args.max_body_bytes,
        max_questions=args.max_questions, max_in_flight=args.max_in_flight,
        max_calls_per_key=args.max_calls_per_key, max_connections=args.max_connections,
        body_timeout_s=args.body_timeout, keep_alive_s=args.keep_alive_timeout,
        allowed_hosts=frozenset(args.allowed_host), default_timeout_s=args.timeout, layout=args.layout,
        max_concurrency=args.max_concurrency, max_retries=args.max_retries, method=args.method,
        order=args.order, cache=not args.no_cache, warm=warm, calibration=calibration, keep_states=kept,
        keep_states_max_bytes=args.keep_states_max_bytes)


class _Refused(Exception):
    """A flag's file or bound that cannot be used: one line, exit 2."""


def _at_door(what: str, read: Callable[[], T]) -> T:
    """``read()``, or :class:`_Refused` naming ``what`` and why (an OSError or a ValueError)."""
    try:
        return read()
    except (OSError, ValueError) as exc:
        raise _Refused(f"{what}: {exc}") from None


def run_serve(args: argparse.Namespace) -> int:
    if args.workers > 1:
        from jev_shared.gateway.workers import TooManyWorkersError, check_workers

        try:  # a bound from this machine, before anything starts
            check_workers(args.workers)
        except TooManyWorkersError as exc:
            print(f"jev serve: --workers {exc}", file=sys.stderr)
            return 2
    try:  # every file and bound read before anything starts (the embedded model, the socket)
        keys = _at_door("API keys", lambda: load_keys(args.api_key_file))  # the file and line: never the key
        warm = _at_door("--warm", lambda: read_questions(args.warm) if args.warm else None)
        calibration = _at_door("--calibration", lambda: load_calibration(args.calibration) if args.calibration else None)
        _at_door("--keep-states-max-bytes", lambda: checked_limit(args.keep_states_max_bytes))
        kept = _at_door("--keep-states", lambda: checked_path(args.keep_states) if args.keep_states else None)
    except _Refused as exc:
        print(f"jev serve: {exc}", file=sys.stderr)
        return 2
    if not keys and not is_loopback(args.host):
        print(f"jev serve: refusing to serve {args.host} without API keys; set JEV_API_KEYS or --api-key-file "
              "(or serve on 127.0.0.1)", file=sys.stderr)
        return 2
    try:
        import uvicorn

        from jev_shared.gateway.app import create_app
        from jev_shared.gateway.logs import configure_logging
        from jev_shared.gateway.protocol import uvicorn_config
    except ImportError as exc:
        raise MissingExtra("serve", exc.name or "a gateway dependency", "serve") from None

    with ExitStack() as stack:
        config = _config(args, keys, warm, stack, calibration, kept)
        configure_logging(args.log_level)
        if not keys:
            print(f"jev serve: no API keys configured: serving loopback only ({args.host}), without authentication",
                  file=sys.stderr)
        print(f"jev serve: http://{args.host}:{args.port}/v1/systemone, models {list(config.backends)}",
              file=sys.stderr)
        if args.workers > 1:  # the embedded model, if any, is running now: every worker points at it
            from jev_shared.gateway.workers import run_workers

            try:
                return run_workers(config, args.host, args.port, args.workers, args.log_level)
            except ImportError as exc:  # gunicorn is POSIX only (not installed on Windows)
                print(f"jev serve: --workers needs gunicorn and uvicorn-worker (the serve extra, POSIX): {exc}",
                      file=sys.stderr)
                return 2
        uvicorn.Server(uvicorn_config(create_app(config), config, host=args.host, port=args.port,
                                      log_level=args.log_level)).run()
    return 0
