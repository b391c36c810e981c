"""A first decision's requests in a bounded order (issue 33, local/first_round.py).

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

from jev_shared.calls import Call, Reply
from jev_shared.local import first_round as fr
from jev_shared.local.slots import SlotCache
from jev_shared.prompt import state_block

STATE = state_block("I was charged twice, please refund.")


def _zero_shot(user: str) -> Call:
    return Call("chat_completions", {"model": "m", "messages": [{"role": "system", "content": "rules; is it spam?"},
                                                                {"role": "user", "content": user}]})


def _with_examples() -> Call:
    return Call("chat_completions", {"model": "m", "messages": [
        {"role": "system", "content": "rules; which team?"}, {"role": "user", "content": "example"},
        {"role": "assistant", "content": "billing"}, {"role": "user", "content": STATE}]})


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


def _name(call: Call) -> str:
    messages = call.kwargs["messages"]
    return "team" if len(messages) > 2 else "N/A" if messages[1]["content"] == state_block("N/A") else "spam"


def _later(fn: Any, *args: Any) -> threading.Thread:
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def test_the_other_first_request_waits_for_the_leader_and_the_leaders_prior_for_both(tmp_path: Path) -> None:
    spam, team, na = _zero_shot(STATE), _with_examples(), _zero_shot(state_block("N/A"))
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
    spam, team = _zero_shot(STATE), _with_examples()
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
    spam, team = _zero_shot(STATE), _with_examples()
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
    send = _Quiet(tmp_path).wrap(_recording(log, {}), [_with_examples(), _zero_shot(STATE)])
    started = time.perf_counter()
    send(_zero_shot(state_block("N/A")))  # a leader's later request: waits for the first ones, which never come
    assert 0.2 <= time.perf_counter() - started < 2 and log == ["N/A sent", "N/A answered"]


def test_another_questions_later_request_waits_for_the_leaders_prior_under_way(tmp_path: Path) -> None:
    """The choice's held-out prior (sent once its answer is back) goes after the noul's N/A call (sent then too), so it
    does not take the noul's slot before that call is read and the slot saved."""
    spam, team, na = _zero_shot(STATE), _with_examples(), _zero_shot(state_block("N/A"))
    held_out = Call("chat_completions", {**team.kwargs, "messages": team.kwargs["messages"][:1] + [
        {"role": "user", "content": STATE}, {"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]})
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
    assert log[-4:] == ["N/A sent", "N/A answered", "team sent", "team answered"]  # (_name calls it "team")


def test_the_async_twin_keeps_the_same_order(tmp_path: Path) -> None:
    spam, team, na = _zero_shot(STATE), _with_examples(), _zero_shot(state_block("N/A"))
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


@pytest.mark.slow
def test_the_readme_first_decision_reads_the_same_tokens_on_every_fresh_server() -> None:
    """Over the wire: each run a fresh server, memory and kept-prompts folder; the choice's answer finds the start it
    shares with the noul's prompt in the server's cache (``timings.cache_n``; SmolLM2: 56 of its 242 tokens)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
    import first_decision as bench

    from jev_shared import SystemOneClient
    from jev_shared.local import WIRE_MODEL, LocalServer

    reads, cached = [], []
    for _ in range(3):
        with tempfile.TemporaryDirectory() as d:
            os.environ["JEV_MEMORY_FILE"] = str(Path(d) / "memory.json")
            try:
                with LocalServer(WIRE_MODEL, prompt_cache=Path(d) / "slots") as srv:
                    resp = SystemOneClient(srv.client(), model=srv.model, debug=True).system_one(
                        bench.STATE, bench.questions())
            finally:
                del os.environ["JEV_MEMORY_FILE"]
        reads.append(bench._reads(resp))
        first = next(a for a in resp.debug["questions"]["team"]["attempts"] if a["kind"] == "response")
        cached.append(first["data"]["timings"].get("cache_n", 0))
    assert all(r == reads[0] for r in reads) and all(n > 0 for n in cached), (reads, cached)
