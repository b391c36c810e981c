"""The sync driver's pace: against a server that answers about as fast as we post, a client's pool
sends one request at a time on the caller's thread (no thread hand-offs); against a slow one its questions stay
in parallel (one round trip, not one each), and a slow reply met one at a time sends the rest in parallel."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from jev_shared import drive
from jev_shared.calls import Budget, Call, Reply

ROUND_TRIP = 0.03


def flow(name: str) -> Any:
    yield Call("chat_completions", {"q": name})
    return name


def flows(n: int = 8) -> list[Any]:
    return [flow(f"q{i}") for i in range(n)]


@pytest.fixture
def pool():
    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="jev") as p:
        yield p


def sender(latency_s: float, posted: list[str]) -> Any:
    def send(call: Call) -> Reply:
        posted.append(threading.current_thread().name)
        time.sleep(latency_s)
        return Reply({"ok": True}, 0.0)
    return send


def timed(pool: ThreadPoolExecutor, send: Any, budget: Budget | None = None, n: int = 8,
          max_concurrency: int = 8) -> float:
    started = time.perf_counter()
    out = drive.run_flows(flows(n), send, scout=False, budget=budget or Budget(), max_concurrency=max_concurrency,
                          pool=pool)
    assert out == [f"q{i}" for i in range(n)]
    return time.perf_counter() - started


def test_after_a_cpu_bound_wave_the_pool_sends_one_at_a_time_on_the_callers_thread(pool, monkeypatch):
    monkeypatch.setattr(drive, "BOUND_FACTOR", 1e9)  # every wave counts as CPU-bound
    monkeypatch.setattr(drive, "FAST_SLACK_S", 10.0)  # and every post as fast, whatever the machine's load
    first: list[str] = []
    timed(pool, sender(0.0, first))
    assert any(name.startswith("jev") for name in first)  # a fresh pool starts in parallel
    assert drive.pace_of(pool).serial
    then: list[str] = []
    timed(pool, sender(0.0, then))
    assert then == [threading.current_thread().name] * 8


def test_against_a_slow_server_the_questions_stay_in_parallel(pool):
    for _ in range(3):
        posted: list[str] = []
        assert timed(pool, sender(ROUND_TRIP, posted)) < 4 * ROUND_TRIP  # one round trip, not eight
        assert sum(name.startswith("jev") for name in posted) == 7
    assert not drive.pace_of(pool).serial


def test_a_slow_reply_met_one_at_a_time_sends_the_rest_in_parallel(pool):
    pace = drive.pace_of(pool)
    pace.serial = True
    posted: list[str] = []
    assert timed(pool, sender(ROUND_TRIP, posted)) < 5 * ROUND_TRIP  # the first alone, then the rest at once
    assert posted[0] == threading.current_thread().name and sum(name.startswith("jev") for name in posted) == 6
    assert not pace.serial and pace.wait == 2  # the next try after two CPU-bound waves


def test_with_a_deadline_every_post_goes_to_the_pool_and_nothing_is_learnt(pool):
    pace = drive.pace_of(pool)
    pace.serial = True
    posted: list[str] = []
    timed(pool, sender(0.0, posted), Budget.of(10.0))
    assert all(name.startswith("jev") for name in posted) and pace.serial


def test_the_back_off_doubles_after_each_slow_try_and_resets_after_a_serial_wave():
    pace = drive.Pace()
    pace.slow()
    pace.cpu_bound()
    pace.cpu_bound()
    assert not pace.serial
    pace.cpu_bound()
    assert pace.serial
    pace.slow()
    assert (pace.wait, pace.backoff) == (4, 4)
    for _ in range(10):
        pace.slow()
    assert pace.backoff == drive.MAX_BACKOFF


def test_below_the_questions_max_concurrency_keeps_its_slots_full(pool):
    """The caller's own post no longer holds the others' slots: 8 requests, 2 at a time, take 4 round trips
    (a driver that sent the rest one by one on the caller's thread took 7)."""
    posted: list[str] = []
    assert timed(pool, sender(ROUND_TRIP, posted), max_concurrency=2) < 6 * ROUND_TRIP
