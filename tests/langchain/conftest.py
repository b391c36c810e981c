"""Fixtures for the LangChain door (the fakes themselves live in lc_fakes.py)."""

from __future__ import annotations

import pytest

from .fakes import Recorder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
