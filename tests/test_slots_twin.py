"""A kept prompt saved after its debias prior's own ``N/A`` call, not a twin of its own (local/slots.py).

The first half drives the slot cache's bookkeeping with a stub send; the second runs the embedded wire model and
checks what the server reports: the same prior numbers as the old path (a twin sent right after the answer), one
loopback request fewer, the same file, and a second decision that sends what it sent before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from jev_shared import Noul, SystemOneClient
from jev_shared.backend import describe
from jev_shared.calls import Call, Reply
from jev_shared.local import WIRE_MODEL, LocalServer
from jev_shared.local.slots import SlotCache
from jev_shared.prompt import state_block
from tests.helpers.calls import repair as repair_turn
from tests.helpers.calls import zero_shot

STATE = "Invoice 88213 was charged twice to my Visa card, please refund it quickly."
QUESTIONS = {"spam": Noul(instructions="This is spam.")}


def _call(state: str, system: str = "rules and a question") -> Call:
    return zero_shot(state, system)


class _Kept(SlotCache):
    """No server: records which calls the slot is kept after (a twin is sent for any but the N/A one)."""

    def __init__(self, folder: Path) -> None:
        super().__init__("http://127.0.0.1:9/v1", folder, n_slots=2)
        self.kept: list[str] = []

    def keep(self, call: Call) -> None:
        self.kept.append(call.kwargs["messages"][-1]["content"])


def _send(sent: list[Call]) -> Any:
    def send(call: Call) -> Reply:
        sent.append(call)
        return Reply({}, 0.0)
    return send


def test_the_answer_waits_for_its_priors_na_call_and_is_kept_after_it(tmp_path: Path) -> None:
    cache, sent = _Kept(tmp_path), []
    send = cache.wrap(_send(sent))
    send(_call(STATE))
    assert cache.kept == [] and cache.pending  # no twin of its own after the answer
    send(_call("N/A"))
    assert cache.kept == [state_block("N/A")] and not cache.pending  # the prior's N/A call is the twin
    assert sent[1].kwargs["extra_body"] == {"id_slot": 0}  # pinned to the slot that holds the prompt
    for state in ("", "[MASK]"):
        send(_call(state))
    cache.settle()
    assert cache.kept == [state_block("N/A")]  # once


def test_a_prompt_whose_prior_is_not_asked_gets_its_twin_when_the_call_is_finished(tmp_path: Path) -> None:
    cache = _Kept(tmp_path)
    cache.wrap(_send([]))(_call(STATE))
    cache.settle()
    assert cache.kept == [state_block(STATE)] and not cache.pending  # keep() sends this one's twin


def test_a_repair_turn_or_another_state_of_the_prompt_keeps_it_first(tmp_path: Path) -> None:
    cache, sent = _Kept(tmp_path), []
    send = cache.wrap(_send(sent))
    send(_call(STATE))
    repair = repair_turn(STATE, "maybe", "Your previous reply was invalid: x")
    send(repair)
    assert cache.kept == [state_block(STATE)] and not cache.pending  # kept before the repair took the slot
    other = _Kept(tmp_path)
    send = other.wrap(_send([]))
    send(_call(STATE))
    send(_call(""))  # a content-free state that is not the twin: the twin of its own first
    assert other.kept == [state_block(STATE)]


def test_a_first_request_that_is_the_twin_is_kept_at_once(tmp_path: Path) -> None:
    cache = _Kept(tmp_path)
    cache.wrap(_send([]))(_call("N/A"))  # prepare()'s state
    assert cache.kept == [state_block("N/A")] and not cache.pending


class _TwinFirst(SlotCache):
    """The path before: the first request's own twin sent and the slot saved as soon as its reply is back."""

    def after(self, call: Call, keep: bool) -> Call | None:
        return call if keep else None


def _counting(cache: SlotCache) -> list[int]:
    """The prompt tokens of the cache's own loopback chat requests (sent past the engine)."""
    counted: list[int] = []
    post = cache._post

    def posting(path: str, body: dict[str, Any]) -> Any:
        out = post(path, body)
        if path.endswith("/chat/completions"):
            counted.append(out["timings"]["prompt_n"])
        return out
    cache._post = posting  # type: ignore[method-assign]
    return counted


def _client(srv: LocalServer, cache: SlotCache) -> SystemOneClient:
    return SystemOneClient(describe(srv.client(), slots=cache), model=srv.model, debug=True, debias=True)


def _sent(resp: Any) -> list[tuple[Any, int]]:
    """Each request's messages and the prompt tokens its reply read anew, in the order sent."""
    attempts = resp.debug["questions"]["spam"]["attempts"]
    bodies = [a["data"]["messages"] for a in attempts if a["kind"] == "request"]
    reads = [a["data"]["timings"]["prompt_n"] for a in attempts if a["kind"] == "response"]
    return list(zip(map(repr, bodies), reads))


@pytest.mark.slow
def test_the_priors_and_the_kept_file_match_the_old_path_with_one_request_fewer(tmp_path: Path) -> None:
    runs = {}
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        for name, kind in (("new", SlotCache), ("old", _TwinFirst), ("new again", SlotCache)):
            for slot in range(srv.n_parallel):  # every run meets empty slots and no kept file
                SlotCache(srv.base_url, tmp_path, srv.n_parallel)._action(slot, "erase", "x")
            for path in [*tmp_path.glob("*.bin"), *tmp_path.glob("*.sha256")]:
                path.unlink()
            folder = tmp_path  # the server's own save path
            cache = kind(srv.base_url, folder, srv.n_parallel)
            loopback = _counting(cache)
            client = _client(srv, cache)
            first = client.system_one(STATE, QUESTIONS)
            second = client.system_one("Win a free cruise, click now!", QUESTIONS)  # later: the prior remembered
            [file] = folder.glob("*.bin")
            runs[name] = (first, second, loopback, file.read_bytes())
    new, old, again = runs["new"], runs["old"], runs["new again"]
    assert new[0].debug["questions"]["spam"]["readout"]["prior"] == old[0].debug["questions"]["spam"]["readout"]["prior"]
    assert new[0].answers["spam"].model_dump() == old[0].answers["spam"].model_dump()  # to the last bit
    assert len(new[2]) == 0 and len(old[2]) == 1  # the old path's loopback twin, gone
    assert new[3] == old[3] == again[3]  # the same file: the question and N/A
    assert [m for m, _ in _sent(new[0])] == [m for m, _ in _sent(old[0])]  # the same requests, in the same order
    assert _sent(new[1]) == _sent(old[1]) and len(_sent(new[1])) == 1  # a second decision: as before
    assert new[1].answers["spam"].model_dump() == old[1].answers["spam"].model_dump()
    assert again[0].debug["questions"]["spam"]["readout"]["prior"] == new[0].debug["questions"]["spam"]["readout"]["prior"]


@pytest.mark.slow
def test_without_a_prior_the_prompt_is_kept_when_the_call_is_finished(tmp_path: Path) -> None:
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        cache = SlotCache(srv.base_url, tmp_path, srv.n_parallel)
        loopback = _counting(cache)
        client = describe(srv.client(), slots=cache)
        SystemOneClient(client, model=srv.model, debias=False).system_one(STATE, QUESTIONS)
        assert not cache.pending and len(loopback) == 1  # its own twin, once the call was finished
    assert len(list(tmp_path.glob("*.bin"))) == 1
