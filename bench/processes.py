"""The CPU benches' other processes: the stub backend, a process's CPU, and ``--pin`` (bench/cpu.py,
bench/gateway_cpu.py): each process on a core of its own.

Served, the gateway, the load client and the stub take turns on the same cores, and a process that slept
finds its cache lines evicted (issue 33: 4.1x the post's last-level misses for 2.1x its instructions). An
operator runs one worker per core; ``Placement`` does the same for a bench run: the measured process alone on
the first core this process may use, the load client on the second and the stub on the third (on the second
with the client where there are only two). With fewer than two cores nothing is pinned, and it says so.
``os.sched_setaffinity`` pins one thread; every thread a process has now is pinned, and the threads and
children it starts later inherit their parent's set.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STUB = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/bench")
from gateway import stub_body
from stub_server import StubServer
with StubServer(latency_s=0.0, body=stub_body()) as url:
    print(url, flush=True)
    time.sleep(3600)
"""
TICK = os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def stubbed() -> Iterator[tuple[str, int]]:
    """The stub backend in another process, for the block: its base URL and process id."""
    stub = subprocess.Popen([sys.executable, "-c", STUB.format(root=str(ROOT))], stdout=subprocess.PIPE, text=True)
    try:
        yield stub.stdout.readline().strip(), stub.pid  # type: ignore[union-attr]
    finally:
        stub.kill()


def proc_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def pin(pid: int, cpus: set[int], children: bool = True) -> None:
    """Every thread of process ``pid`` (and of its children, e.g. gunicorn's workers) onto ``cpus``."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue
        kids = task / "children"
        for child in kids.read_text().split() if children and kids.exists() else []:
            pin(int(child), cpus)


class Placement:
    """Where the measured process, the load client (this process) and the stub run; ``on`` False: unpinned."""

    def __init__(self, wanted: bool) -> None:
        cores = sorted(os.sched_getaffinity(0))
        self.on = wanted and len(cores) >= 2
        self.reason = "" if self.on else ("not asked" if not wanted else f"only {len(cores)} core(s) here")
        self.measured = {cores[0]}
        self.client = {cores[1]} if self.on else set(cores)
        self.stub = {cores[2]} if self.on and len(cores) >= 3 else self.client
        self.cores = set(cores)

    def describe(self) -> str:
        if not self.on:
            return f"not pinned ({self.reason})"
        stub = "the stub with it" if self.stub == self.client else f"the stub on CPU {min(self.stub)}"
        return (f"pinned: the measured process alone on CPU {min(self.measured)}, the load client on CPU "
                f"{min(self.client)}, {stub}")

    def own_rows(self, stub_pid: int) -> None:
        """This process measured (the post, the engine rows): itself on the measured core, the stub elsewhere."""
        if self.on:
            pin(os.getpid(), self.measured, children=False)  # the stub and the gateways are its children
            pin(stub_pid, self.stub)

    def served_rows(self, server_pid: int, stub_pid: int) -> None:
        """A served process measured (the gateway, the floors): it alone on the measured core, this process (the
        load client) and the stub on the others."""
        if self.on:
            pin(os.getpid(), self.client, children=False)
            pin(server_pid, self.measured)
            pin(stub_pid, self.stub)


def cachegrind_refs(args: list[str]) -> int:
    """Instructions a Python run of ``args`` executes under valgrind's cachegrind (no cache model, fixed hash seed)."""
    import re

    cmd = ["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null", sys.executable, *args]
    err = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": "0"}).stderr
    found = re.findall(r"I\s+refs:\s+([\d,]+)", err)
    if not found:
        raise RuntimeError(err[-2000:])
    return int(found[-1].replace(",", ""))
