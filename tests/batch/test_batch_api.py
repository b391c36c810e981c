"""The engine's batch API over loopback (real openai SDK, stub backend): order, tagging, bounds, failures."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import Counter

import openai
import pytest

from jev_shared import AsyncSystemOneClient, InvalidQuestionError, ProviderError, SystemOneClient
from jev_shared.batch import Item, adecide_batch, as_item, astream_batch, decide_batch, stream_batch
from tests.batch.conftest import QUESTIONS, TEAM


def sync_client(stub, **kw) -> SystemOneClient:
    return SystemOneClient(openai.OpenAI(base_url=stub.base_url, api_key="unused"), model="m",
                           api="chat_completions", method="logprobs", max_retries=0, **kw)


def async_client(stub, **kw) -> AsyncSystemOneClient:
    return AsyncSystemOneClient(openai.AsyncOpenAI(base_url=stub.base_url, api_key="unused"), model="m",
                                api="chat_completions", method="logprobs", max_retries=0, **kw)


def tickets(n: int) -> list[tuple[str, str]]:
    """Each state says which team the stub will answer, so an answer shows whose state it read."""
    return [(f"t{i}", f"ticket {i} want={'billing' if i % 3 else 'technical'} truth={'yes' if i % 2 else 'no'}")
            for i in range(n)]


def test_results_come_back_in_input_order_each_answering_its_own_state(stub):
    items = tickets(12)
    result = decide_batch(sync_client(stub), items, QUESTIONS, concurrency=4)
    assert [r.id for r in result.results] == [i for i, _ in items]
    for r, (_, state) in zip(result.results, items):
        assert r.ok and r.response.answers["team"].choice == state.split("want=")[1].split()[0]
        assert (r.response.answers["spam"].noul > 0.5) == ("truth=yes" in state)
    asked = Counter(s for p in stub.prompts() for _, s in items if f"<state>\n{s}" in p)
    assert stub.requests == 24 and asked == {s: 2 for _, s in items}  # each state once per question


def test_totals_add_up_what_the_backend_billed(stub):
    result = decide_batch(sync_client(stub), tickets(5), QUESTIONS, concurrency=2)
    t = result.totals
    assert (t.answered, t.decisions, t.n_calls, t.n_retries) == (5, 10, stub.requests, 0)
    assert (t.input_tokens, t.output_tokens) == (50 * stub.requests, stub.requests)  # the stub bills 50 + 1
    assert t.as_dict()["failed"] == {} and t.wall_s > 0 and t.decisions_per_s > 0


def release_when_sent(stub, n: int) -> None:
    """Let the held item go once the backend has seen ``n`` requests (the others are all answered)."""
    deadline = time.monotonic() + 20
    while stub.requests < n and time.monotonic() < deadline:
        time.sleep(0.01)
    stub.release.set()


def test_streamed_results_come_as_they_finish_tagged_with_their_id(stub):
    items = [("slow", "#hold# want=billing"), *tickets(5)]
    seen = []
    for r in stream_batch(sync_client(stub), items, {"team": TEAM}, concurrency=3):
        seen.append(r.id)
        if len(seen) == 5:
            stub.release.set()  # every other item is out before the held one is let go
    assert seen[-1] == "slow" and sorted(seen[:5]) == sorted(i for i, _ in tickets(5))


def test_in_input_order_a_held_item_keeps_the_later_ones_back(stub):
    items = [("slow", "#hold# want=billing"), *tickets(4)]
    threading.Thread(target=release_when_sent, args=(stub, 5), daemon=True).start()
    stream = stream_batch(sync_client(stub), items, {"team": TEAM}, concurrency=2, ordered=True)
    assert [r.id for r in stream] == ["slow", "t0", "t1", "t2", "t3"]


@pytest.mark.parametrize("concurrency", [1, 3])
def test_concurrency_bounds_the_requests_in_flight(concurrency):
    from tests.batch.conftest import BatchStub

    with BatchStub(latency_s=0.02) as slow:
        result = decide_batch(sync_client(slow, max_concurrency=1), tickets(10), {"team": TEAM},
                              concurrency=concurrency)
        assert len(result.results) == 10 and slow.requests == 10
        assert 1 <= slow.max_in_flight <= concurrency


def test_a_failing_item_keeps_its_typed_error_and_the_run_goes_on(stub):
    items = [("a", "want=billing"), ("b", "#boom# want=billing"), ("c", "want=technical")]
    result = decide_batch(sync_client(stub), items, {"team": TEAM}, concurrency=2)
    [bad] = result.failed
    assert bad.id == "b" and isinstance(bad.error, ProviderError) and bad.error.status_code == 500
    assert [r.response.answers["team"].choice for r in result.results if r.ok] == ["billing", "technical"]
    assert result.totals.failed == {"backend_error": 1} and result.totals.answered == 2
    line = bad.to_json()
    assert line["answers"] is None and line["error"]["type"] == "backend_error"
    assert line["error"]["exception"] == "ProviderError" and line["error"]["status_code"] == 500


def test_a_bad_state_fails_its_item_alone_without_a_request(stub):
    items = [("nan", {"x": math.nan}), ("ok", "want=billing")]
    result = decide_batch(sync_client(stub), items, {"team": TEAM})
    assert isinstance(result.results[0].error, InvalidQuestionError) and result.results[1].ok
    assert result.results[0].to_json()["error"]["type"] == "invalid_question"
    assert stub.requests == 1


def test_bad_questions_or_concurrency_raise_before_any_request(stub):
    bad = {"urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["now"]}}
    with pytest.raises(InvalidQuestionError) as err:
        stream_batch(sync_client(stub), tickets(3), bad)
    assert err.value.question_id == "urgency"
    with pytest.raises(InvalidQuestionError):
        astream_batch(async_client(stub), tickets(3), bad)
    with pytest.raises(InvalidQuestionError):
        decide_batch(sync_client(stub), tickets(3), QUESTIONS, concurrency=0)
    assert stub.requests == 0


def test_items_may_be_pairs_mappings_items_or_bare_states():
    assert as_item(("x", "s"), 3) == Item("x", "s")
    assert as_item({"id": 7, "state": "s"}, 3) == Item(7, "s")
    assert as_item({"text": "a dict state"}, 3) == Item(3, {"text": "a dict state"})
    assert as_item("bare", 4) == Item(4, "bare") and as_item(Item("i", "s"), 0) == Item("i", "s")


def test_async_batch_keeps_order_bounds_and_failures(stub):
    items = [*tickets(6), ("b", "#boom#")]
    result = asyncio.run(adecide_batch(async_client(stub, max_concurrency=1), items, {"team": TEAM}, concurrency=3))
    assert [r.id for r in result.results] == [i for i, _ in items]
    assert stub.max_in_flight <= 3 and stub.requests == 7
    assert result.totals.answered == 6 and result.totals.failed == {"backend_error": 1}


def test_async_stream_tags_results_as_they_finish(stub):
    async def run() -> list[str]:
        seen = []
        async for r in astream_batch(async_client(stub), [("slow", "#hold#"), *tickets(3)], {"team": TEAM},
                                     concurrency=2):
            seen.append(r.id)
            if len(seen) == 3:
                stub.release.set()
        return seen

    seen = asyncio.run(run())
    assert seen[-1] == "slow" and sorted(seen[:3]) == ["t0", "t1", "t2"]
