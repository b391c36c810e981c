"""The fault matrix: each fault × surface × sync/async, through the real SDKs over loopback HTTP.

Every call asks two questions, the faulty one and a good one: a cell that must fail must fail
the whole call (nothing partial comes back), and a cell that recovers must answer both.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from jev_shared import JevError

from .cells import Cell, case_id, cases
from .conftest import STATE, engine, questions
from .server import FaultServer

CASES = cases()


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_cell(fault_server: FaultServer, ask: Any, case: tuple[Cell, str, bool]) -> None:
    cell, surface, sync = case
    fault_server.arm(cell.script, forever=cell.forever)
    client = engine(fault_server.url, surface, sync, **cell.options)
    method = cell.method_for(surface)
    outcome: Any
    if cell.error is not None:
        with pytest.raises(JevError) as info:
            ask(client, STATE, questions(), method=method, **cell.call)
        outcome = info.value
        assert isinstance(outcome, cell.error), f"expected {cell.error.__name__}, got {type(outcome).__name__}: {outcome}"
    else:
        outcome = ask(client, STATE, questions(), method=method, **cell.call)
        assert list(outcome.answers) == ["q", "ok"]
        assert outcome.debug["methods"]["q"] == (cell.fallback or method)
    if cell.settle:
        time.sleep(cell.settle)  # a failed call must stay quiet: count what arrives after it
    sent = fault_server.marked()
    if cell.requests is None:
        assert sent, "the faulty question sent no request"
    else:
        assert len(sent) == cell.requests, f"{len(sent)} requests, expected {cell.requests}"
    if cell.requests == 0:
        assert fault_server.requests == []
    if cell.check is not None:
        cell.check(outcome, sent, surface)
