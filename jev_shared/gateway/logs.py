"""Logging for ``jev serve``: access lines (already JSON) to stdout as they are; the rest to stderr."""

from __future__ import annotations

import logging
import sys

from .observe import ACCESS_LOG


def configure_logging(level: str = "info") -> None:
    """One JSON line per request on stdout; uvicorn's and the engine's own messages on stderr."""
    access = logging.StreamHandler(sys.stdout)
    access.setFormatter(logging.Formatter("%(message)s"))
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
