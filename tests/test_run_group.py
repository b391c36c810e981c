"""scripts/run_group.sh, which scripts/test.sh runs pytest under: one Ctrl-C ends the command and everything it
started, even a command that ignores the interrupt and a child that ignores TERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# a command like a test run stuck in its teardown: it ignores SIGINT, and its child ignores SIGTERM too
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"],
    stdout=subprocess.PIPE, text=True)
child.stdout.readline()
print(child.pid, flush=True)
time.sleep(60)
"""


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state == "Z"  # a zombie has ended; only its parent's reaping is left


def test_one_interrupt_ends_the_command_and_all_it_started():
    # the script starts as a terminal's foreground job would: a group of its own, SIGINT not ignored
    proc = subprocess.Popen(["bash", "scripts/run_group.sh", sys.executable, "-c", STUBBORN], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        grandchild = int(proc.stdout.readline())
        started = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # what one Ctrl-C sends: the foreground group, not the command's own
        assert proc.wait(timeout=15) == 130
        assert time.monotonic() - started < 10
        deadline = time.monotonic() + 5
        while not gone(grandchild) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gone(grandchild), "a process the command started outlived the interrupt"
        assert "stopped: ending" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_the_commands_exit_status_is_kept():
    out = subprocess.run(["bash", "scripts/run_group.sh", sys.executable, "-c", "raise SystemExit(3)"], cwd=ROOT,
                         capture_output=True, timeout=60)
    assert out.returncode == 3
