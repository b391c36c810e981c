"""32 concurrent clients against the gateway over the stub: no lost, failed or mixed-up answers.

Each request's state names its own option (``want=k<n>``, an option only that request has) and a
truth word, and the stub answers from the prompt; an answer that reached the wrong caller would
name another request's option. Bounded in count (32 x 8 requests) and time (the test's timeout).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.gateway.conftest import KEY, MODEL

CLIENTS, PER_CLIENT = 32, 8


def one_client(url: str, client_no: int) -> list[tuple[int, int, dict]]:
    out = []
    with httpx.Client(base_url=url, headers={"authorization": f"Bearer {KEY}"}, timeout=30) as http:
        for j in range(PER_CLIENT):
            n = client_no * PER_CLIENT + j
            truth = "yes" if n % 2 else "no"
            questions = {
                "route": {"type": "choice", "instructions": "Which route?",
                          "criteria": {f"k{n}": "this request's own route", "other": "anything else"}},
                "flag": {"type": "noul", "instructions": "The flag is set."},
            }
            resp = http.post("/v1/systemone", json={"model": MODEL, "state": f"request {n} want=k{n} truth={truth}",
                                                    "questions": questions})
            out.append((n, resp.status_code, resp.json()))
    return out


@pytest.mark.timeout(180)
def test_concurrent_clients_get_their_own_answers(gateway_url, stub):
    with ThreadPoolExecutor(CLIENTS) as pool:
        results = [r for rs in pool.map(lambda i: one_client(gateway_url, i), range(CLIENTS)) for r in rs]
    assert len(results) == CLIENTS * PER_CLIENT
    assert [(status, body) for _, status, body in results if status != 200] == []
    for n, _, body in results:
        assert body["answers"]["route"]["choice"] == f"k{n}"
        assert (body["answers"]["flag"]["noul"] > 0.5) == bool(n % 2)
    assert stub.requests == 2 * CLIENTS * PER_CLIENT
    # every backend request carried exactly one caller's marker
    markers = [re.findall(r"request (\d+) want", str(b["messages"])) for b in stub.bodies]
    assert all(len(set(m)) == 1 for m in markers)
    assert sorted(int(m[0]) for m in markers) == sorted(2 * list(range(CLIENTS * PER_CLIENT)))
