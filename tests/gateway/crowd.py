"""Many clients at once against a gateway over the stub, and ``jev serve`` started as a subprocess.

Each request's state names its own option (``want=k<n>``, an option only that request has) and a
truth word, and the stub answers from the prompt, so an answer that reached the wrong caller would
name another request's option (tests/gateway/test_load.py, test_workers.py).
"""

from __future__ import annotations

import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from tests.gateway.conftest import KEY, MODEL

Result = tuple[int, int, dict[str, Any]]


def one_client(url: str, client_no: int, per_client: int, timeout: float = 30) -> list[Result]:
    """``per_client`` requests in turn, each with its own option and truth: (n, status, body) each."""
    out = []
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=timeout) as http:
        for j in range(per_client):
            n = client_no * per_client + j
            truth = "yes" if n % 2 else "no"
            questions = {"route": {"type": "choice", "instructions": "Which route?",
                                   "criteria": {f"k{n}": "this request's own route", "other": "anything else"}},
                         "flag": {"type": "noul", "instructions": "The flag is set."}}
            resp = http.post("/v1/systemone", json={"model": MODEL, "state": f"request {n} want=k{n} truth={truth}",
                                                    "questions": questions})
            out.append((n, resp.status_code, resp.json()))
    return out


def crowd(url: str, clients: int, per_client: int, timeout: float = 30) -> list[Result]:
    """Every client on its own thread, all at once."""
    with ThreadPoolExecutor(clients) as pool:
        return [r for rs in pool.map(lambda i: one_client(url, i, per_client, timeout), range(clients)) for r in rs]


def assert_each_got_its_own(results: list[Result], stub: Any, total: int) -> None:
    """No error, every answer its own request's, and every backend request carrying one caller's marker."""
    assert len(results) == total
    assert [(status, body) for _, status, body in results if status != 200] == []
    for n, _, body in results:
        assert body["answers"]["route"]["choice"] == f"k{n}"
        assert (body["answers"]["flag"]["noul"] > 0.5) == bool(n % 2)
    assert stub.requests == 2 * total
    markers = [re.findall(r"request (\d+) want", str(b["messages"])) for b in stub.bodies]
    assert all(len(set(m)) == 1 for m in markers)
    assert sorted(int(m[0]) for m in markers) == sorted(2 * list(range(total)))


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float) -> None:
    """Until ``/healthz`` answers 200; a process that exits or a deadline passed fails with its stderr."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url + "/healthz").status_code == 200:
                return
        except httpx.TransportError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"jev serve did not start: {proc.communicate()[1]}")
        time.sleep(0.1)
