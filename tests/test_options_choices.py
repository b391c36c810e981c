"""Options: the CLI and the gateway take their choices and defaults from the engine's Options."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, get_args

from jev_shared import Options
from jev_shared.cli import parser
from jev_shared.gateway.config import Backend, GatewayConfig
from jev_shared.options import CHOICES, Layout, Method, Mode

#: the applications' own defaults, on purpose (docs/engine.md): one prompt shape for every request of a service,
#: so the server's prompt cache is shared, and the one surface every OpenAI-compatible server speaks
APP_DEFAULTS: dict[str, Any] = {"layout": "state_last", "api": "chat_completions"}


def _actions() -> list[tuple[str, argparse.Action]]:
    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))  # noqa: SLF001
    return [(name, a) for name, p in sub.choices.items() for a in p._actions]  # noqa: SLF001


def test_every_cli_option_of_the_engine_offers_its_choices_and_default() -> None:
    seen = set()
    for command, action in _actions():
        if action.dest not in CHOICES or action.dest == "api":  # --backend-api is the gateway's own subset
            continue
        seen.add(action.dest)
        assert tuple(action.choices or ()) == Options.choices(action.dest), (command, action.dest)
        assert action.default == APP_DEFAULTS.get(action.dest, Options.default(action.dest)), (command, action.dest)
    assert {"method", "layout"} <= seen


def test_the_gateways_engine_defaults_are_the_options() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(GatewayConfig)}
    fields["api"] = next(f.default for f in dataclasses.fields(Backend) if f.name == "api")
    for name in ("method", "layout", "api", "max_concurrency", "top_logprobs", "max_retries"):
        assert fields[name] == APP_DEFAULTS.get(name, Options.default(name)), name


def test_the_options_literals_are_the_checked_choices() -> None:
    assert Options.choices("method") == get_args(Method) and Options.choices("mode") == get_args(Mode)
    assert Options.choices("layout") == get_args(Layout)


def test_a_call_validates_its_options_once() -> None:
    """No per-call option: the client's own Options, not a copy checked again; per-call ones are set as given."""
    opts = Options(model="m")
    assert opts.for_call() is opts
    call = opts.for_call(method="structured", top_logprobs=5)
    assert (call.method, call.top_logprobs, call.mode) == ("structured", 5, "system1") and opts.method == "auto"
