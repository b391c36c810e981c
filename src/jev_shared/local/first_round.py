"""The first round: a call's first requests in a bounded order where the server has not read some of their prompts yet.

On a fresh server the first requests of a call leave at once. A prompt read here for the first time is
pinned to a slot of its own (:mod:`.slots`); the call's other first requests share the start of its prompt (the
rules, about 50 tokens) and find it in the server's cache only if they reach llama.cpp after that prompt was read:
when both land in one batch, each reads the whole of its prompt (the README example's first decision read
430 prompt tokens in a third of the runs instead of 377). So, within one call, without a request added or changed:

* the **leaders** (first requests of prompts this server has not read, each pinned to a slot) go one after another,
  in the call's order (read in one batch, two prompts give other probabilities in the last digits);
* the call's **other first requests** wait until every leader has its reply, then go: llama.cpp gives each the idle
  slot that shares most of its prompt (a leader's) and keeps what it overwrites in its prompt cache;
* a **leader's later requests** (its content-free prior, pinned to the leader's slot) wait until every first request
  has its reply: they find the leader's prompt in that cache, and no first request finds its slot taken;
* the leaders' later requests and **any other later request** (a held-out prior of another question) are never in
  flight together: each waits for those of the other kind that are waiting or in flight when it is sent. The other
  request is not pinned, and llama.cpp gives it the idle slot that shares most of its prompt: often a leader's (the
  README example's choice shares the rules with the noul). When a request pinned to that slot reached llama.cpp
  together with it, the server swapped its prompt cache into the slot before the other request was read, and both
  read their prompts anew (the README example read 573 prompt tokens instead of 377 in 5 of 13 idle runs,
  with other probabilities in the 6th digit). One after the other, in either order, they read the same tokens to the
  bit (measured on the 1.5B, docs/benchmarks.md).

Only a call that has both leaders and other first requests gets a round (a server's first few calls: the prompts a
server pins are at most its slots); no answer depends on it, only what the server reads anew. A wait is bounded by
:data:`WAIT_S`, so requests held back elsewhere (a thread pool or connection limit shared with other calls) cannot
hold a call for good: past it a request goes as it would have gone without a round.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

from ..calls import Call

#: The longest a request waits for its turn (seconds); past it, it is sent.
WAIT_S = 30.0


class FirstRound:
    """One call's first round: which requests wait for what, and what has its reply (sync or async: ``event``)."""

    def __init__(self, leaders: dict[str, Call], others: list[Call], key_of: Callable[[Call], str | None],
                 event: Callable[[], Any] = threading.Event) -> None:
        self._calls = [*leaders.values(), *others]  # held, so that no later request is given one of their ids
        self._leaders = {id(c) for c in leaders.values()}
        self._others = {id(c) for c in others}
        #: leader → the reply the leader before it waits for (one leader at a time: two prompts read in one batch
        #: give other probabilities in the last digits than each read alone, so a first decision is the same on
        #: every fresh server only in a fixed order)
        self._replied = {id(c): event() for c in leaders.values()}
        order = [id(c) for c in leaders.values()]
        self._after = dict(zip(order[1:], order))
        self._firsts = self._leaders | self._others
        self._keys, self._key_of, self._event = set(leaders), key_of, event
        #: the later requests waiting or in flight, each with the event set when it has its reply: the leaders' / others'
        self._later: dict[int, Any] = {}
        self._other_later: dict[int, Any] = {}
        self._lock = threading.Lock()
        #: set once every leader has its reply / once every first request has
        self.leaders_read, self.firsts_read = event(), event()

    def waits_for(self, call: Call) -> list[Any]:
        """The events ``call`` waits for before it is sent (none: a leader, or its turn has come)."""
        if id(call) in self._leaders:
            before = self._after.get(id(call))
            return [] if before is None else [self._replied[before]]
        if id(call) in self._others:
            return [self.leaders_read]
        with self._lock:  # a later request: after those of the other kind under way (a leader's: after every first too)
            if self._key_of(call) in self._keys:
                self._later[id(call)] = self._event()
                return [self.firsts_read, *self._other_later.values()]
            self._other_later[id(call)] = self._event()
            return list(self._later.values())

    def answered(self, call: Call) -> None:
        """``call`` has its reply (or its error): the requests waiting for it may go."""
        with self._lock:
            self._leaders.discard(id(call))
            self._firsts.discard(id(call))
            leaders, firsts = not self._leaders, not self._firsts
            later = self._later.pop(id(call), None) or self._other_later.pop(id(call), None)
            replied = self._replied.pop(id(call), None)
        for done, event in ((leaders, self.leaders_read), (firsts, self.firsts_read), (later, later), (replied, replied)):
            if done:
                event.set()

    def turn(self, call: Call) -> None:
        """Wait (this thread) until ``call`` may be sent."""
        deadline = time.monotonic() + WAIT_S
        for event in self.waits_for(call):
            event.wait(max(0.0, deadline - time.monotonic()))

    async def aturn(self, call: Call) -> None:
        """Wait (this task) until ``call`` may be sent."""
        events = self.waits_for(call)
        if events:
            try:
                await asyncio.wait_for(asyncio.gather(*(e.wait() for e in events)), WAIT_S)
            except TimeoutError:
                pass


def first_round(firsts: list[Call], leaders: dict[str, Call], key_of: Callable[[Call], str | None],
                event: Callable[[], Any]) -> FirstRound | None:
    """The call's round, where it has leaders (by their prompts' keys) and other first requests, or several leaders;
    else None."""
    others = [c for c in firsts if all(c is not leader for leader in leaders.values())]
    return FirstRound(leaders, others, key_of, event) if leaders and (others or len(leaders) > 1) else None


__all__ = ["WAIT_S", "FirstRound", "first_round"]
