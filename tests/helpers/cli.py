"""The ``jev`` command in a child process, as a user runs it: bounded in time, no memory file written."""

from __future__ import annotations

import os
import subprocess
import sys


def jev(*args: str, env: dict[str, str] | None = None, stdin: str | None = None,
        timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "jev_shared.cli", *args], capture_output=True, text=True,
                          timeout=timeout, input=stdin, env={**os.environ, "JEV_NO_CACHE": "1", **(env or {})})


def one_line_exit_2(out: subprocess.CompletedProcess[str], *names: str) -> None:
    """Refused at the door: exit 2, one line on stderr naming one of ``names``, no traceback."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, (out.returncode, out.stderr[-1500:])
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr[-1500:]
    assert any(name in lines[0] for name in names), lines[0]
