"""Logging for ``jev serve``: access lines (already JSON) to stdout as they are; the rest to stderr."""

from __future__ import annotations

import logging
import sys

from .observe import ACCESS_LOG


class LineHandler(logging.StreamHandler):
    """Writes each record's message as it is, one line: the access line is already its JSON, so no
    formatter runs per request."""

    def format(self, record: logging.LogRecord) -> str:
        return record.getMessage()


def configure_logging(level: str = "info") -> None:
    """One JSON line per request on stdout; uvicorn's and the engine's own messages on stderr."""
    access = LineHandler(sys.stdout)
    ACCESS_LOG.handlers[:] = [access]
    ACCESS_LOG.setLevel(logging.INFO)
    ACCESS_LOG.propagate = False
    other = logging.StreamHandler(sys.stderr)
    other.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    for name in ("uvicorn", "jev_shared"):
        log = logging.getLogger(name)
        log.handlers[:] = [other]
        log.setLevel(level.upper())
        log.propagate = False
    ACCESS_LOG.propagate = False
