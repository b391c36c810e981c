"""The ``jev`` command: a thin argparse front; each subcommand lives with the code it drives.

A command is a ``(name, add_parser, run)`` entry in :data:`COMMANDS`; ``run(args)`` returns the
exit status. ``jev serve`` and ``jev decide`` are the gateway's (:mod:`jev_shared.gateway.commands`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import calibrate_cli
from .gateway import commands

Command = tuple[str, Callable[[Any], None], Callable[[argparse.Namespace], int]]
COMMANDS: list[Command] = [
    ("serve", commands.add_serve, commands.run_serve),
    ("decide", commands.add_decide, commands.run_decide),
    ("calibrate", calibrate_cli.add_calibrate, calibrate_cli.run_calibrate),
]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jev", description="Typed decisions (choice, score, noul) from any chat model.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add, run in COMMANDS:
        add(sub)
        sub.choices[name].set_defaults(run=run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
