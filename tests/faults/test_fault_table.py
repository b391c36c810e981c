"""docs/engine.md shows the fault table the matrix runs, rendered from the same cells."""

from __future__ import annotations

from scripts.fault_table import DOC, render, section


def test_the_docs_hold_the_rendered_fault_table() -> None:
    held = section(DOC.read_text())
    assert held is not None, "docs/engine.md lacks the fault-table markers: run python scripts/fault_table.py --write"
    assert held == render(), "docs/engine.md's fault table is stale: run python scripts/fault_table.py --write"
