"""Every ``jev`` flag checked at the door: argparse ``type=`` functions and the parser that reports a bad
one in one line on stderr, exit status 2, before anything starts (no model, no server, no request).

A ``type=`` function raises ``argparse.ArgumentTypeError`` with what a value must be; argparse names
the flag. A number must be finite (``nan`` and ``inf`` are refused) and within its range.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from typing import NoReturn, TypeVar
from urllib.parse import urlsplit

N = TypeVar("N", int, float)
_HOST = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._:-]+)$")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose error is one line (``jev serve: argument --port: ...``), exit status 2."""

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


class Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each flag's default (none where there is none)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)


def _number(kind: Callable[[str], N], low: float, high: float, what: str) -> Callable[[str], N]:
    def check(text: str) -> N:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    check.__name__ = what  # argparse names the type in its own messages
    return check


#: An integer >= 1 (counts, limits, sizes).
positive_int = _number(int, 1, math.inf, "an integer of at least 1")
#: An integer >= 0 (retries).
count = _number(int, 0, math.inf, "an integer of at least 0")
#: A TCP port.
port = _number(int, 1, 65535, "a port (1-65535)")
#: Seconds: a finite number above 0.
seconds = _number(float, 1e-3, 1e9, "a number of seconds above 0 (finite)")
#: A probability or a confidence: 0 to 1.
unit = _number(float, 0.0, 1.0, "a number from 0 to 1")
#: A weight counted in answers: 0 to a million.
answers = _number(float, 0.0, 1e6, "a number of answers from 0 to 1,000,000")
#: A coverage or a rate that must leave room on both sides: strictly between 0 and 1.
open_unit = _number(float, 1e-6, 1 - 1e-6, "a number strictly between 0 and 1")


def text(value: str) -> str:
    """Any text but the empty one (a name, a column, a path: what it names is checked where it is read)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def host(value: str) -> str:
    """A host name or an IP address to listen on or to accept in ``Host``."""
    if not _HOST.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a host name or an IP address")
    return value


def url(value: str) -> str:
    """An http(s) base URL with a host (and a port in range, if any)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise argparse.ArgumentTypeError("is not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError("must be an http:// or https:// URL with a host (e.g. http://gpu:8000/v1)")
    return value
