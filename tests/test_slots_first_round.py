"""A first decision's requests in a bounded order (local/first_round.py).

With a stub send, the order the slot cache lets the requests out in: a prompt the server has not read goes first;
the call's other first request once it has its reply; the leader's content-free prior once every first request has
its reply. Then on the embedded server (SmolLM2): the README example's first decision reads the same prompt tokens on
every fresh server, the choice's answer finding the start it shares with the noul's prompt in the server's cache.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from jev_shared.calls import Call, Intent, Reply
from jev_shared.local import first_round as fr
from jev_shared.local.slots import SlotCache
from jev_shared.prompt import state_block
from tests.helpers.calls import with_turns, zero_shot

USER_STATE = "I was charged twice, please refund."
STATE = state_block(USER_STATE)


def _zero_shot(state: str) -> Call:
    return zero_shot(state, "rules; is it spam?")


def _with_examples() -> Call:
    return with_turns([{"role": "system", "content": "rules; which team?"}, {"role": "user", "content": "example"},
                       {"role": "assistant", "content": "billing"}, {"role": "user", "content": STATE}])


class _Quiet(SlotCache):
    """No server: nothing is kept (the order is what is looked at)."""

    def __init__(self, folder: Path) -> None:
        super().__init__("http://127.0.0.1:9/v1", folder, n_slots=4)

    def keep(self, call: Call) -> None:
        pass


def _recording(log: list[str], hold: dict[str, threading.Event]) -> Any:
    def send(call: Call) -> Reply:
        name = _name(call)
        log.append(f"{name} sent")
        if name in hold:
            assert hold[name].wait(5)
        log.append(f"{name} answered")
        return Reply({}, 0.0)
    return send


def _held_out(team: Call) -> Call:
    """The choice's held-out prior: its rules, an example as the state (never pinned: not zero-shot)."""
    return with_turns(team.kwargs["messages"][:1] + [{"role": "user", "content": STATE},
                                                     {"role": "assistant", "content": "x"},
                                                     {"role": "user", "content": "y"}], Intent.PRIOR)


def _name(call: Call) -> str:
    messages = call.kwargs["messages"]
    if len(messages) > 2:
        return "held" if messages[-1]["content"] == "y" else "team"
    return {state_block("N/A"): "N/A", state_block(""): "empty"}.get(messages[1]["content"], "spam")


def _later(fn: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def test_the_other_first_request_waits_for_the_leader_and_the_leaders_prior_for_both(tmp_path: Path) -> None:
    spam, team, na = _zero_shot(USER_STATE), _with_examples(), _zero_shot("N/A")
    log: list[str] = []
    release = {"team": threading.Event()}
    send = _Quiet(tmp_path).wrap(_recording(log, release), [team, spam])
    first = _later(send, team)  # the team's request reaches the cache first ...
    time.sleep(0.1)
    assert log == []  # ... and waits
    send(spam)  # the leader (a zero-shot prompt this server has not read) goes at once
    time.sleep(0.1)
    assert log == ["spam sent", "spam answered", "team sent"]
    prior = _later(send, na)  # the leader's content-free prior, pinned to its slot: after every first request
    time.sleep(0.1)
    assert log[-1] == "team sent"
    release["team"].set()
    first.join(5)
    prior.join(5)
    assert log == ["spam sent", "spam answered", "team sent", "team answered", "N/A sent", "N/A answered"]


def test_a_failed_leader_lets_the_others_go(tmp_path: Path) -> None:
    spam, team = _zero_shot(USER_STATE), _with_examples()
    log: list[str] = []

    def send(call: Call) -> Reply:
        log.append(_name(call))
        if _name(call) == "spam":  # (the cache sends it pinned to its slot: a copy)
            raise ConnectionError("down")
        return Reply({}, 0.0)

    wrapped = _Quiet(tmp_path).wrap(send, [team, spam])
    waiting = _later(wrapped, team)
    with pytest.raises(ConnectionError):
        wrapped(spam)
    waiting.join(5)
    assert log == ["spam", "team"]


def test_no_round_without_a_new_prompt_or_without_another_request(tmp_path: Path) -> None:
    cache = _Quiet(tmp_path)
    assert fr.first_round([_with_examples()], {}, lambda call: None, threading.Event) is None
    spam, team = _zero_shot(USER_STATE), _with_examples()
    log: list[str] = []
    cache.wrap(_recording(log, {}))(spam)  # the server has read the prompt now: no leader left
    hold = {"team": threading.Event()}
    send = cache.wrap(_recording(log, hold), [team, spam])
    waiting = _later(send, team)
    time.sleep(0.1)
    assert log[-1] == "team sent"  # nothing waits
    send(spam)
    assert log[-2:] == ["spam sent", "spam answered"]
    hold["team"].set()
    waiting.join(5)


def test_a_wait_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fr, "WAIT_S", 0.2)
    log: list[str] = []
    send = _Quiet(tmp_path).wrap(_recording(log, {}), [_with_examples(), _zero_shot(USER_STATE)])
    started = time.perf_counter()
    send(_zero_shot("N/A"))  # a leader's later request: waits for the first ones, which never come
    assert 0.2 <= time.perf_counter() - started < 2 and log == ["N/A sent", "N/A answered"]


def test_another_questions_later_request_waits_for_the_leaders_prior_under_way(tmp_path: Path) -> None:
    """The choice's held-out prior (sent once its answer is back) goes after the noul's N/A call (sent then too), so it
    does not take the noul's slot before that call is read and the slot saved."""
    spam, team, na = _zero_shot(USER_STATE), _with_examples(), _zero_shot("N/A")
    held_out = _held_out(team)
    log: list[str] = []
    release = {"team": threading.Event(), "N/A": threading.Event()}
    send = _Quiet(tmp_path).wrap(_recording(log, release), [team, spam])
    first = _later(send, team)
    send(spam)
    prior = _later(send, na)  # waits for the team's reply
    time.sleep(0.1)
    release["team"].set()
    first.join(5)
    time.sleep(0.1)
    other = _later(send, held_out)  # N/A is in flight (held): the held-out prior waits for it
    time.sleep(0.1)
    assert log[-1] == "N/A sent"
    release["N/A"].set()
    for thread in (prior, other):
        thread.join(5)
    assert log[-4:] == ["N/A sent", "N/A answered", "held sent", "held answered"]


def _past_the_first_requests(tmp_path: Path, log: list[str], hold: dict[str, threading.Event]) -> Any:
    """The README example's round once its first requests and the leader's N/A call have their replies."""
    spam, team = _zero_shot(USER_STATE), _with_examples()
    send = _Quiet(tmp_path).wrap(_recording(log, hold), [team, spam])
    first = _later(send, team)
    send(spam)
    first.join(5)
    send(_zero_shot("N/A"))
    return send


def test_the_leaders_next_prior_call_waits_for_another_questions_prior_under_way(tmp_path: Path) -> None:
    """The bad order of the 573-token runs: the choice's held-out prior (not pinned: llama.cpp gives it the noul's idle
    slot) is in flight when the noul's empty-state call (pinned to that slot) comes. The pinned call now waits for its
    reply; together, the server swapped its prompt cache into the slot under the held-out request, and both read their
    prompts anew."""
    log: list[str] = []
    hold = {"held": threading.Event()}
    send = _past_the_first_requests(tmp_path, log, hold)
    held = _later(send, _held_out(_with_examples()))
    time.sleep(0.1)
    empty = _later(send, _zero_shot(""))
    time.sleep(0.1)
    assert log[-1] == "held sent"  # the empty state waits
    hold["held"].set()
    for thread in (held, empty):
        thread.join(5)
    assert log[-4:] == ["held sent", "held answered", "empty sent", "empty answered"]


def test_released_by_the_same_reply_the_two_kinds_of_later_request_do_not_overlap(tmp_path: Path) -> None:
    """The idle runs' order: the held-out prior waits for the noul's N/A call; that call's reply releases it, and the
    noul's flow sends its empty state at once. Before, both then left (the empty state waited for the first requests
    only) and met in llama.cpp; now the empty state waits for the held-out prior's reply."""
    in_flight: set[str] = set()
    overlaps: list[set[str]] = []
    lock, na_reply = threading.Lock(), threading.Event()

    def server(call: Call) -> Reply:
        with lock:
            in_flight.add(_name(call))
            overlaps.extend([set(in_flight)] if {"held", "empty"} <= in_flight else [])
        if _name(call) == "N/A":
            assert na_reply.wait(5)
        time.sleep(0.02)
        with lock:
            in_flight.discard(_name(call))
        return Reply({}, 0.0)

    spam, team = _zero_shot(USER_STATE), _with_examples()
    send = _Quiet(tmp_path).wrap(server, [team, spam])
    first = _later(send, team)
    send(spam)
    first.join(5)
    noul = _later(lambda: (send(_zero_shot("N/A")), send(_zero_shot(""))))
    time.sleep(0.05)
    held = _later(send, _held_out(team))  # waits for the N/A call
    time.sleep(0.05)
    assert in_flight == {"N/A"}
    na_reply.set()
    for thread in (noul, held):
        thread.join(5)
    assert not overlaps and not in_flight


def test_the_async_twin_keeps_the_same_order(tmp_path: Path) -> None:
    spam, team, na = _zero_shot(USER_STATE), _with_examples(), _zero_shot("N/A")
    log: list[str] = []

    async def asend(call: Call) -> Reply:
        log.append(f"{_name(call)} sent")
        await asyncio.sleep(0.05)
        log.append(f"{_name(call)} answered")
        return Reply({}, 0.0)

    async def main() -> None:
        send = _Quiet(tmp_path).awrap(asend, [team, spam])
        first = asyncio.create_task(send(team))
        await asyncio.sleep(0.01)
        await send(spam)
        await asyncio.gather(first, send(na))

    asyncio.run(main())
    assert log == ["spam sent", "spam answered", "team sent", "team answered", "N/A sent", "N/A answered"]


def test_the_async_twin_keeps_the_later_requests_apart(tmp_path: Path) -> None:
    """AsyncSystemOneClient's path (awrap): the held-out prior in flight, the noul's empty state waits for its reply."""
    spam, team = _zero_shot(USER_STATE), _with_examples()
    log: list[str] = []

    async def asend(call: Call) -> Reply:
        log.append(f"{_name(call)} sent")
        await asyncio.sleep(0.05 if _name(call) == "held" else 0.01)
        log.append(f"{_name(call)} answered")
        return Reply({}, 0.0)

    async def main() -> None:
        send = _Quiet(tmp_path).awrap(asend, [team, spam])
        first = asyncio.create_task(send(team))
        await send(spam)
        await asyncio.gather(first, send(_zero_shot("N/A")))
        held = asyncio.create_task(send(_held_out(team)))
        await asyncio.sleep(0.01)
        await asyncio.gather(held, send(_zero_shot("")))

    asyncio.run(main())
    assert log[-4:] == ["held sent", "held answered", "empty sent", "empty answered"]


#: Prompt tokens the README example's first decision reads on the 0.5B (the 1.5B shares its tokenizer): 377 when the
#: choice with examples was not kept and found the rules the noul read in the server's cache; 430 when it was asked
#: as listed only, each prompt reading the rules in a slot of its own; now the choice reversed too (its own slot,
#: twin and held-out prior), each later leader's slot started from the first one's kept file.
READ_05B = 586


@pytest.mark.slow
@pytest.mark.parametrize("model", ["smollm2", pytest.param("qwen2.5-coder-0.5b", marks=[pytest.mark.live, pytest.mark.qwen])])
def test_the_readme_first_decision_reads_the_same_tokens_on_every_fresh_server(model: str) -> None:
    """Over the wire: each run a fresh server, memory and kept-prompts folder; the choice (with examples) as listed and
    reversed and the noul each lead on a slot of their own, kept for the next process (three files), and every run
    reads the same tokens (the 0.5B: READ_05B tokens, as the 1.5B; they share a tokenizer) and gives the same
    probabilities to the bit. The noul and the reversed choice start their slots from the first choice's kept file,
    so the rules every prompt begins with are read once (bench/first_decision.py's prompts: 84 and 155 tokens
    read of 137 and 219)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import first_decision as bench

    from jev_shared import SystemOneClient
    from jev_shared.local import WIRE_MODEL, LocalServer

    reads, kept, probs = [], [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            os.environ["JEV_MEMORY_FILE"] = str(Path(d) / "memory.json")
            try:
                with LocalServer(WIRE_MODEL if model == "smollm2" else model, prompt_cache=Path(d) / "slots") as srv:
                    resp = SystemOneClient(srv.client(), model=srv.model, debug=True).system_one(
                        bench.STATE, bench.questions())
                kept.append(len(list((Path(d) / "slots").glob("*.bin"))))
            finally:
                del os.environ["JEV_MEMORY_FILE"]
        reads.append(bench._reads(resp))
        probs.append((resp.answers["team"].probabilities, resp.answers["spam"].noul))
    assert all(r == reads[0] for r in reads) and kept == [3, 3, 3], (reads, kept)
    assert all(p == probs[0] for p in probs), probs
    first = reads[0]
    assert first["team (reversed)"][0] < first["team"][0] - 40, first  # as long a prompt: its start was restored
    if model != "smollm2":
        assert sum(map(sum, reads[0].values())) == READ_05B, reads[0]
