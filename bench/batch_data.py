"""The batch jobs' data: the project's own labelled support tickets (``bench/data/routing.jsonl``) as a CSV.

The 100 labelled tickets are cycled to any length (``row-0001`` … in order, the label kept in its
own column), so the 1,000-row resume check (``python -m bench batch_resume``) is ten passes over the same labelled set.
``want_marker=True`` appends `` want=<label>`` to each text: the tests' stub backend answers that
option, so an answer shows which row it read.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parent / "data"

#: The routing question of bench/quality.py, as the System One wire's ``questions`` object.
ROUTING: dict[str, Any] = {"team": {
    "type": "choice", "instructions": "Which team should handle this support ticket?",
    "criteria": {
        "billing": "charges, refunds, invoices, payment methods, plans and prices",
        "technical": "bugs, errors, crashes, slowness, integrations and the API",
        "account": "login, passwords, two-factor authentication, profile, team members and permissions",
        "shipping": "delivery, tracking, damaged or missing parcels, delivery address, sending goods back",
    }}}


def labelled(n: int) -> list[dict[str, str]]:
    """``n`` rows ``{id, text, label}``, cycling the labelled routing tickets."""
    base = [json.loads(line) for line in (DATA / "routing.jsonl").read_text().splitlines() if line.strip()]
    return [{"id": f"row-{i + 1:04d}", "text": base[i % len(base)]["text"], "label": base[i % len(base)]["label"]}
            for i in range(n)]


def write_csv(path: Path, n: int, *, want_marker: bool = False) -> list[dict[str, str]]:
    """The labelled rows as a CSV with columns id, text, label; returns the rows."""
    rows = labelled(n)
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["id", "text", "label"])
        w.writeheader()
        for row in rows:
            w.writerow({**row, "text": row["text"] + (f" want={row['label']}" if want_marker else "")})
    return rows


def write_questions(path: Path) -> Path:
    path.write_text(json.dumps(ROUTING, indent=1))
    return path
