"""The embedded models for a test module: started once, or the module skipped naming what is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jev_shared.local import LocalModelError, LocalServer


def started(model: str, **kwargs: Any) -> Iterator[LocalServer]:
    """``LocalServer(model, **kwargs)`` started for a fixture to yield from, stopped after; a skip if it cannot start."""
    try:
        srv = LocalServer(model, **kwargs).start()
    except LocalModelError as exc:
        pytest.skip(str(exc))
    yield srv
    srv.stop()
