"""compare_routers' data: the routes, the labelled items, the worked examples and the ``--set`` swap.

``ROUTES`` and ``RENAME`` are changed in place by :func:`use_set`, so every module that imported
them sees the routes of the set being run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from sets import criteria_for

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT / "bench" / "data" / "routing_compare.jsonl"
EXAMPLES = ROOT / "bench" / "data" / "routing_compare_examples.jsonl"
MODELS = {"smollm2": "smollm2-135m", "qwen": "qwen2.5-coder-0.5b", "qwen15": "qwen2.5-coder-1.5b"}
#: Context per server slot: every prompt here fits in a fifth of it.
N_CTX = 2048
#: The output cap given to the contenders that generate text (none sends one by default): a routing
#: answer takes well under 100 tokens, so only a reply that runs on is cut. It shortens their worst
#: latencies (without it a small model can run on to the end of the context), never their accuracy.
GEN_CAP = 256

INSTRUCTIONS = "Which internal team should handle this employee request?"
ROUTES = {
    "hr": "human resources: leave and holidays, sick days, payroll and salary, benefits and pension, hiring, "
          "onboarding, performance reviews, workplace conduct",
    "it": "IT support: laptops and phones, passwords and logins, VPN, email, software and licences, printers, "
          "Wi-Fi, security incidents",
    "legal": "legal: contracts, NDAs, compliance, data privacy and GDPR, trademarks and copyright, disputes",
    "finance": "finance: expense claims and reimbursements, corporate cards, vendor invoices and payments, "
               "purchase orders, budgets",
    "facilities": "facilities: office space, desks, meeting rooms, heating and air conditioning, cleaning, "
                  "repairs, parking, building access badges",
    "travel": "business travel: flights, trains, hotels, rental cars, visas, travel policy and bookings",
}

#: Unscored requests every contender sends first (not in the data set).
WARMUP = ["Who do I talk to about a broken chair in my office?", "Where do I find the holiday calendar for 2027?",
          "My new laptop battery drains in two hours."]

#: The bench's route name → its name in the option set run (``--set``; bench/sets.py).
RENAME: dict[str, str] = {k: k for k in ROUTES}


def use_set(which: str) -> None:
    """Swap the routes for a variant of them (names that collide, 40+ options); items are relabelled."""
    criteria, rename = criteria_for(ROUTES, which)
    ROUTES.clear()
    ROUTES.update(criteria)
    RENAME.clear()
    RENAME.update(rename)


def load_items(limit: int | None) -> list[dict[str, str]]:
    """The first ``limit`` items: the file cycles through the six routes, so a multiple of 6 is balanced."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()]
    rows = [{**r, "label": RENAME.get(r["label"], r["label"])} for r in rows]
    return rows[:limit] if limit else rows


def load_examples() -> list[Any]:
    """One worked example per route, kept apart from the scored items."""
    from jev_shared import Example

    rows = [json.loads(line) for line in EXAMPLES.read_text().splitlines() if line.strip()]
    return [Example(state=r["text"], answer=RENAME.get(r["label"], r["label"])) for r in rows]
