"""The ``jev`` command: a thin argparse front over the applications (gateway, batch, calibration).

A command is a ``(name, add_parser, run)`` entry in :data:`COMMANDS`; ``run(args)`` returns the
exit status. Nothing heavy (the web framework, the model) is imported until a command runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from .calibrate import add_calibrate, run_calibrate
from .checks import Formatter, Parser
from .decide import add_decide, run_decide
from .serve import add_serve, run_serve

Command = tuple[str, Callable[[Any], None], Callable[[argparse.Namespace], int]]
COMMANDS: list[Command] = [
    ("serve", add_serve, run_serve),
    ("decide", add_decide, run_decide),
    ("calibrate", add_calibrate, run_calibrate),
]


def jev_version() -> str:
    """The installed distribution's version (``jev --version``)."""
    try:
        return version("jev-integrations")
    except PackageNotFoundError:  # pragma: no cover - run from a tree that was never installed
        return "unknown (not installed)"


def parser() -> argparse.ArgumentParser:
    """The ``jev`` parser: every flag typed and range-checked (:mod:`.checks`), defaults shown in ``--help``."""
    p = Parser(prog="jev", description="Typed decisions (choice, score, noul) from any chat model.",
               formatter_class=Formatter)
    p.add_argument("--version", action="version", version=f"%(prog)s {jev_version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, add, run in COMMANDS:
        add(sub)
        sub.choices[name].formatter_class = Formatter
        sub.choices[name].set_defaults(run=run)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
