"""``jev serve`` from a checkout in a subprocess, ready once ``/healthz`` answers 200 (bench/gateway.py,
bench/gateway_cpu.py, bench/batch.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from jev_shared.local import free_port  # noqa: E402


class Served:
    """``jev serve`` from checkout ``root`` with ``args``, authenticated by ``key``; ``health`` is /healthz's body."""

    def __init__(self, args: Sequence[str], key: str, root: Path = ROOT) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "jev_shared.cli", "serve", "--port", str(self.port), "--log-level", "warning",
             "--max-in-flight", "256", *args],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=str(root),
            env={**os.environ, "JEV_API_KEYS": key, "PYTHONPATH": str(root / "src")})
        self.url = f"http://127.0.0.1:{self.port}"
        self.health: dict[str, Any] = {}

    def __enter__(self) -> Served:
        deadline = time.monotonic() + 120
        while True:
            try:
                resp = httpx.get(self.url + "/healthz")
                if resp.status_code == 200:
                    self.health = resp.json()
                    return self
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"jev serve did not start: {self.proc.stderr.read()}")  # type: ignore[union-attr]
            time.sleep(0.1)

    def __exit__(self, *exc: object) -> None:
        self.proc.send_signal(signal.SIGINT)  # a clean exit: a profile under cProfile is written
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
