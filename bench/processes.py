"""The benches' other processes: the stub backend, ``jev serve`` from a checkout, the bare ASGI floor, a
process's CPU, and ``--pin`` (bench/cpu.py, bench/gateway_cpu.py): each process on a core of its own.

*The stub backend* (:class:`StubServer`): a local OpenAI-compatible server with a fixed latency, which isolates
client-side cost from the model's. It answers every /v1/chat/completions with a one-token reply and a 20-entry
logprob window after sleeping ``latency_s``, in a thread per request, so concurrency is real: the tests'
loopback server (:mod:`tests.helpers.server`) with one fixed body and no request log.

*Served* (:class:`Served`): ``jev serve`` from a checkout in a subprocess, ready once ``/healthz`` answers 200.

*The floor under any gateway on these parts* (``python bench/processes.py asgi PORT BACKEND MODE``): uvicorn with
the gateway's settings serving ``POST /v1/systemone`` from a bare ASGI app with a fixed 300-byte JSON reply. MODE
``in`` answers at once (uvicorn, httptools and the event loop: what receiving and answering a request costs),
``post`` first posts one Chat Completions body to ``BACKEND`` with the HTTP client the gateway posts to its
backends with and reads its JSON (what a gateway that does nothing else costs). ``GET`` answers 200 (readiness).
bench/gateway_cpu.py reads this process's CPU per request beside the gateway's.

*Placement* (``--pin``): served, the gateway, the load client and the stub take turns on the same cores, and a
process that slept finds its cache lines evicted (4.1x the post's last-level misses for 2.1x its instructions,
measured unpinned). An operator runs one worker per core; ``Placement`` does the same for a bench run: the
measured process alone on the first core this process may use, the load client on the second and the stub on the
third (on the second with the client where there are only two). With fewer than two cores nothing is pinned, and
it says so. ``os.sched_setaffinity`` pins one thread; every thread a process has now is pinned, and the threads
and children it starts later inherit their parent's set.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from jev_shared.local import free_port  # noqa: E402
from tests.helpers.replies import chat, window  # noqa: E402
from tests.helpers.server import Loopback  # noqa: E402
from tests.helpers.wire import Reply, json_reply  # noqa: E402

STUB = """
import sys, time
sys.path.insert(0, {root!r}); sys.path.insert(0, {root!r} + "/bench")
from gateway import stub_body
from processes import StubServer
with StubServer(latency_s=0.0, body=stub_body()) as url:
    print(url, flush=True)
    time.sleep(3600)
"""
TICK = os.sysconf("SC_CLK_TCK")


WINDOW = [(t, -0.1 * i) for i, t in enumerate(["A", "B", "C", "D", " A", "The", "a", "b", "E", "F",
                                                "G", "H", "I", "J", "K", "L", "M", "N", "O", "P"])]


def reply_body(finish_reason: str = "length") -> bytes:
    """The one-token reply ``A``: cut at the cap ("length") or finished by the model ("stop")."""
    return json_reply(chat("A", {"content": window(WINDOW, ("A", 0.0))}, finish_reason, usage=(100, 1))).body


BODY = reply_body()


class StubServer:
    """``with StubServer(latency_s=0.02) as base_url: ...``"""

    def __init__(self, latency_s: float = 0.02, body: bytes = BODY) -> None:
        reply = Reply(200, body)
        self.server = Loopback(lambda _req: reply, latency_s=latency_s, record=False)

    def __enter__(self) -> str:
        return self.server.start().base_url

    def __exit__(self, *exc: object) -> None:
        self.server.stop()


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


REPLY = json.dumps({"model": "stub", "answers": {"team": {"type": "choice", "choice": "billing", "probabilities": {
    "billing": 0.8301567115036309, "technical": 0.12416539307800148, "sales": 0.045677895418367656},
    "confidence": 0.7452350672554464}}, "usage": {"input_tokens": 60, "output_tokens": 1, "n_calls": 1,
                                                  "n_retries": 0, "latency_ms": 2.0}}, separators=(",", ":")).encode()
BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1, "logprobs": True,
                   "top_logprobs": 20, "temperature": 0}).encode()
HEADERS = [(b"content-type", b"application/json"), (b"content-length", str(len(REPLY)).encode())]


def floor_app(backend: str, post: bool) -> Any:
    """The bare ASGI app; with ``post``, one backend post per request over one kept async client: the one the
    gateway posts to its backends with (``config.backend_posts``: aiohttp; a tree from before it: the SDK's httpx
    one)."""
    import openai

    from jev_shared.gateway import config

    def made() -> Any:
        http = openai.DefaultAsyncHttpxClient()
        return (config.backend_posts("", http) if hasattr(config, "backend_posts") else None) or http

    state: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                state["http"] = made()
                await send({"type": "lifespan.startup.complete"})
            await state["http"].aclose()
            return await send({"type": "lifespan.shutdown.complete"})
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        if post and scope["method"] == "POST":
            reply = await state["http"].post(backend + "/chat/completions", content=BODY,
                                             headers={"content-type": "application/json"})
            json.loads(reply.content)
        await send({"type": "http.response.start", "status": 200, "headers": HEADERS})
        await send({"type": "http.response.body", "body": REPLY})

    return app


def serve_floor() -> None:
    import uvicorn

    from jev_shared.gateway.config import GatewayConfig
    from jev_shared.gateway.protocol import uvicorn_config

    port, backend, mode = int(sys.argv[2]), sys.argv[3], sys.argv[4]
    uvicorn.Server(uvicorn_config(floor_app(backend, mode == "post"), GatewayConfig(backends={}), port=port)).run()


if __name__ == "__main__" and sys.argv[1:2] == ["asgi"]:
    serve_floor()
