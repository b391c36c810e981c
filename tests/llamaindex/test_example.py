"""The LlamaIndex example runs end to end on the embedded model, with no API key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llamaindex_router.py"


@pytest.mark.live
@pytest.mark.slow  # a subprocess that imports LlamaIndex, starts its own server and generates three answers
def test_example_routes_every_question():
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    env["JEV_MODEL"] = "smollm2-135m"  # the small embedded model: fast; its routes are near chance
    out = subprocess.run([sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-2000:]
    routes = [line for line in out.stdout.splitlines() if line.strip().startswith("route:")]
    assert len(routes) == 3
    assert all(any(f"route: {name} " in r for name in ("billing", "technical", "office")) for r in routes)
