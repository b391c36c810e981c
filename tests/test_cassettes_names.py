"""Names that collide, a shared prefix read on, and 40 options by name: replayed from the embedded server."""

from __future__ import annotations

import json
import math

import pytest

from tests.test_cassettes_recorded import recorded_windows, run


def bodies(cas):
    return [json.loads(r.body) for r in cas.requests]


def test_names_sharing_a_first_word_go_out_as_what_differs(cassette):
    resp, cas = run(cassette, "names_collide")
    assert cas.all_played and len(cas.requests) == 1
    system = bodies(cas)[0]["messages"][0]["content"]
    assert "status: to know where the order is" in system and "order_status" not in system
    assert "(status, cancel, refund)" in system
    assert resp.debug["labels"] == {"want": "names"}
    assert set(resp.answers["want"].probabilities) == {"order_status", "order_cancel", "order_refund"}


def test_a_shared_prefix_is_read_on_with_the_prefix_prefilled(cassette):
    resp, cas = run(cassette, "names_continuation")
    assert cas.all_played and len(cas.requests) == 2
    first, second = bodies(cas)
    prefix = second["messages"][-1]
    assert prefix["role"] == "assistant" and second["messages"][:-1] == first["messages"]
    assert second["max_tokens"] == 1 and second["logprobs"] is True
    answer = resp.answers["tool"]
    assert sum(answer.probabilities.values()) == pytest.approx(1.0)
    # the chain: the names the prefix starts share its probability by the continuation window
    window = {w["token"]: w["logprob"] for w in recorded_windows("names_continuation")[1]}
    digits = {f"queue_1{d}": window.get(str(d)) for d in range(6)}
    seen = {k: v for k, v in digits.items() if v is not None}
    a, b = sorted(seen, key=seen.get, reverse=True)[:2]
    assert math.isclose(answer.probabilities[a] / answer.probabilities[b], math.exp(seen[a] - seen[b]), rel_tol=1e-6)


def test_forty_options_are_read_by_name_from_one_token(cassette):
    resp, cas = run(cassette, "names_forty")
    assert cas.all_played and len(cas.requests) == 1
    body = bodies(cas)[0]
    assert body["max_tokens"] == 1 and "response_format" not in body
    answer = resp.answers["dept"]
    assert len(answer.probabilities) == 40 and resp.method_of("dept") == "logprobs"
    assert sum(answer.probabilities.values()) == pytest.approx(1.0)
