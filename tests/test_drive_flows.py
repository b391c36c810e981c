"""The sync driver (drive.run_flows): flows run on the caller's thread, only their requests on the
pool's threads; the call's limits (max_concurrency, the budget, scout waves, error order) hold as before."""

from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jev_shared import drive
from jev_shared.calls import Budget, Call, Reply
from jev_shared.errors import DecisionTimeoutError, ProviderError

TRACE: contextvars.ContextVar[str] = contextvars.ContextVar("trace", default="")


def flow(name: str, n_calls: int = 1, seen: list[str] | None = None) -> Any:
    """A flow of ``n_calls`` requests that notes the thread each of its steps ran on; ends with its name."""
    for k in range(n_calls):
        if seen is not None:
            seen.append(threading.current_thread().name)
        try:
            yield Call("chat_completions", {"q": name, "k": k})
        except ProviderError as exc:
            return f"{name}: {exc.status_code}"
    if seen is not None:
        seen.append(threading.current_thread().name)
    return name


def reply(_call: Call) -> Reply:
    return Reply({"ok": True}, 0.0)


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="jev") as p:
        yield p


def test_flows_run_on_the_callers_thread_and_only_the_posts_on_the_pool(pool):
    """With a deadline every post is on a worker thread (the caller keeps the clock); without one, the caller
    sends the last request that fits itself rather than wait idle."""
    me = threading.current_thread().name
    for budget in (Budget.of(10.0), Budget()):
        seen: list[str] = []
        posted: list[tuple[str, str]] = []
        gate = threading.Barrier(4, timeout=5)  # all four first requests are in flight at once

        def send(call: Call, posted: list[tuple[str, str]] = posted, gate: threading.Barrier = gate) -> Reply:
            posted.append((call.kwargs["q"], threading.current_thread().name))
            if call.kwargs["k"] == 0:
                gate.wait()
            return reply(call)

        out = drive.run_flows([flow(f"q{i}", 2, seen) for i in range(4)], send, scout=False, budget=budget,
                              max_concurrency=8, pool=pool)
        assert out == ["q0", "q1", "q2", "q3"]
        assert set(seen) == {me}
        first = {q: name for q, name in posted[:4]}
        if budget.deadline is not None:
            assert len(posted) == 8 and all(name.startswith("jev") for _, name in posted)
        else:
            assert first["q3"] == me and all(first[q].startswith("jev") for q in ("q0", "q1", "q2"))


def test_one_question_without_a_deadline_sends_on_the_callers_thread(pool):
    posted: list[str] = []

    def send(call: Call) -> Reply:
        posted.append(threading.current_thread().name)
        return reply(call)

    assert drive.run_flows([flow("q", 3)], send, scout=False, budget=Budget(), max_concurrency=8, pool=pool) == ["q"]
    assert posted == [threading.current_thread().name] * 3


def test_at_most_max_concurrency_requests_in_flight(pool):
    lock = threading.Lock()
    active = peak = 0

    def send(call: Call) -> Reply:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.01)
        with lock:
            active -= 1
        return reply(call)

    out = drive.run_flows([flow(f"q{i}", 2) for i in range(8)], send, scout=False, budget=Budget(),
                          max_concurrency=3, pool=pool)
    assert out == [f"q{i}" for i in range(8)]
    assert peak == 3


def test_the_budget_ends_the_call_and_no_request_leaves_after(pool):
    sent: list[Any] = []
    release = threading.Event()

    def send(call: Call) -> Reply:
        sent.append(call.kwargs["q"])
        release.wait(2.0)
        return reply(call)

    started = time.perf_counter()
    budget = Budget.of(0.2)
    with pytest.raises(DecisionTimeoutError):
        drive.run_flows([flow(f"q{i}", 3) for i in range(4)], send, scout=False, budget=budget, max_concurrency=2,
                        pool=pool)
    assert time.perf_counter() - started < 1.0
    assert budget.cancelled
    release.set()
    time.sleep(0.1)
    assert sorted(sent) == ["q0", "q1"]  # the two in flight; the others were never sent, nor any second request


def test_provider_faults_go_back_into_the_flow_and_other_errors_are_the_questions_outcome(pool):
    def send(call: Call) -> Reply:
        if call.kwargs["q"] == "q1":
            raise ProviderError("no", status_code=400)
        if call.kwargs["q"] == "q2":
            raise RuntimeError("broken")
        return reply(call)

    out = drive.run_flows([flow(f"q{i}") for i in range(4)], send, scout=False, budget=Budget(), max_concurrency=8,
                          pool=pool)
    assert out[0] == "q0" and out[1] == "q1: 400" and out[3] == "q3"
    assert isinstance(out[2], RuntimeError)
    assert drive.first_error(out) is out[2]


def test_a_failed_scout_sends_nothing_more(pool):
    sent: list[str] = []

    def send(call: Call) -> Reply:
        sent.append(call.kwargs["q"])
        raise RuntimeError("the surface is not there")

    out = drive.run_flows([flow(f"q{i}") for i in range(4)], send, scout=True, budget=Budget(), max_concurrency=8,
                          pool=pool)
    assert sent == ["q0"] and isinstance(out[0], RuntimeError) and out[1:] == [None, None, None]


def test_the_posts_see_the_callers_context(pool):
    seen: list[str] = []

    def send(call: Call) -> Reply:
        seen.append(TRACE.get())
        return reply(call)

    token = TRACE.set("span-1")
    try:
        drive.run_flows([flow(f"q{i}") for i in range(3)], send, scout=False, budget=Budget(), max_concurrency=8,
                        pool=pool)
    finally:
        TRACE.reset(token)
    assert seen == ["span-1"] * 3


def test_without_a_pool_one_is_built_for_the_call_and_shut_down():
    before = threading.active_count()
    out = drive.run_flows([flow(f"q{i}") for i in range(3)], reply, scout=False, budget=Budget.of(5.0),
                          max_concurrency=8)
    assert out == ["q0", "q1", "q2"]
    time.sleep(0.1)
    assert threading.active_count() <= before


def test_one_at_a_time_without_a_deadline_sends_on_the_callers_thread(pool):
    posted: list[str] = []

    def send(call: Call) -> Reply:
        posted.append(threading.current_thread().name)
        return reply(call)

    out = drive.run_flows([flow(f"q{i}", 2) for i in range(3)], send, scout=False, budget=Budget(),
                          max_concurrency=1, pool=pool)
    assert out == ["q0", "q1", "q2"] and posted == [threading.current_thread().name] * 6


def test_one_question_keeps_its_error_as_its_outcome():
    def broken(_call: Call) -> Reply:
        raise RuntimeError("broken")

    def refused(_call: Call) -> Reply:
        raise ProviderError("no", status_code=400)

    out = drive.run_flows([flow("q")], broken, scout=False, budget=Budget(), max_concurrency=8)
    assert isinstance(out[0], RuntimeError)
    assert drive.run_flows([flow("q")], refused, scout=False, budget=Budget(), max_concurrency=8) == ["q: 400"]
