"""The planner does no I/O: a call's kept prompts are settled by the clients once its flows have ended, the
async client off its event loop; and a plan's first requests, taken early, leave the flows as they were."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from jev_shared import AsyncSystemOneClient, Noul, SystemOneClient, drive, transport
from jev_shared.backend import Backend, KeptPrompts
from jev_shared.calls import Budget, Call, Reply
from jev_shared.errors import ProviderError
from jev_shared.planning import Plan
from tests.helpers.provider import aprovider, provider
from tests.helpers.replies import windows

QUESTIONS = {"spam": Noul(instructions="This is spam."), "ad": Noul(instructions="This is an advert.")}
WINDOW = {"Yes": -0.2, "No": -1.8}


class Recording:
    """A kept-prompts double: passes every request through, records what is asked of it, always has work."""

    pending = True

    def __init__(self, settle_s: float = 0.0) -> None:
        self.events: list[str] = []
        self.settle_s = settle_s
        self.settled_on: list[int] = []

    def wrap(self, send: Callable[[Call], Reply], firsts: list[Call] | None = None) -> Callable[[Call], Reply]:
        self.events.append("wrap")

        def sending(call: Call) -> Reply:
            self.events.append("send")
            return send(call)
        return sending

    def awrap(self, asend: Callable[[Call], Awaitable[Reply]],
              firsts: list[Call] | None = None) -> Callable[[Call], Awaitable[Reply]]:
        self.events.append("wrap")

        async def sending(call: Call) -> Reply:
            self.events.append("send")
            return await asend(call)
        return sending

    def settle(self) -> None:
        self.events.append("settle")
        self.settled_on.append(threading.get_ident())
        time.sleep(self.settle_s)


def test_the_double_is_what_the_backend_declares() -> None:
    slots: KeptPrompts = Recording()  # the typed field: pending, wrap, awrap, settle (no getattr)
    assert Backend(slots=slots).slots is slots


def test_planner_finish_sends_nothing_and_the_sync_client_settles_after_the_flows() -> None:
    slots = Recording()
    client = SystemOneClient(provider(windows(WINDOW)), model="m", backend=Backend(surfaces=("chat_completions",),
                                                                                    slots=slots))
    planner = client._planner
    plan = planner.plan("Buy now!", QUESTIONS)
    send = partial(transport.send, client.client, policy=client.retry_policy, budget=plan.budget)
    outcomes = drive.run_flows(plan.flows, send, scout=plan.scout, budget=plan.budget, max_concurrency=8)
    resp = planner.finish(plan, outcomes)
    assert set(resp.answers) == set(QUESTIONS) and slots.events == []  # finish: no settle, nothing sent
    client.system_one("Buy now!", QUESTIONS)
    assert slots.events == ["wrap", "send", "send", "settle"]  # once, after the flows


def test_a_call_that_fails_still_settles_before_its_error_is_raised() -> None:
    slots = Recording()
    client = SystemOneClient(provider(lambda req: {"error": "no"}), model="m",
                             backend=Backend(surfaces=("chat_completions",), slots=slots))
    try:
        client.system_one("Buy now!", QUESTIONS)
    except Exception:  # noqa: BLE001 - whichever error the call ends with
        pass
    assert slots.events[-1] == "settle"


def test_the_async_client_settles_off_its_event_loop() -> None:
    slots = Recording(settle_s=0.3)
    client = AsyncSystemOneClient(aprovider(windows(WINDOW)), model="m",
                                  backend=Backend(surfaces=("chat_completions",), slots=slots))

    async def main() -> tuple[int, int, int]:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.create_task(ticker())
        before = ticks
        await client.system_one("Buy now!", QUESTIONS)
        done.set()
        await task
        return before, ticks, threading.get_ident()

    before, after, loop_thread = asyncio.run(main())
    assert slots.events[-1] == "settle" and slots.settled_on != [loop_thread]  # on a thread of its own
    assert after - before >= 10  # the loop went on ticking through the 0.3 s settle


def _flow(name: str, n: int) -> Any:
    """Asks ``n`` requests; a ProviderError thrown in is answered with its status; ends with what it was sent."""
    got = []
    for k in range(n):
        try:
            reply = yield Call("chat_completions", {"q": name, "k": k})
        except ProviderError as exc:
            got.append(exc.status_code)
        else:
            got.append(reply.body["k"])
    return name, got


def _broken() -> Any:
    raise ValueError("before any request")
    yield  # noqa: B901


def _plan(flows: list[Any], concurrency: int = 8, scout: bool = False) -> Plan:
    return Plan([], flows, [], scout, Budget(), 0.0, False, concurrency)


def test_first_requests_are_taken_early_and_the_flows_go_on_as_before() -> None:
    plan = _plan([_flow("a", 2), _flow("b", 3), _broken()])
    firsts = plan.first_requests()
    assert [c.kwargs for c in firsts] == [{"q": "a", "k": 0}, {"q": "b", "k": 0}]

    def send(call: Call) -> Reply:
        if call.kwargs == {"q": "b", "k": 1}:
            raise ProviderError("busy", status_code=503)
        return Reply({"k": call.kwargs["k"]}, 0.0)

    outcomes = drive.run_flows(plan.flows, send, scout=False, budget=Budget(), max_concurrency=8)
    assert outcomes[:2] == [("a", [0, 1]), ("b", [0, 503, 2])]
    assert isinstance(outcomes[2], ValueError)  # raised where it was, when driven
    assert plan.flows[0] is not None and firsts[0] is not None


def test_no_first_requests_where_they_would_not_leave_at_once() -> None:
    for plan in (_plan([_flow("a", 1), _flow("b", 1)], concurrency=1), _plan([_flow("a", 1), _flow("b", 1)], scout=True),
                 _plan([_flow("a", 1)])):
        flows = list(plan.flows)
        assert plan.first_requests() == [] and plan.flows == flows  # untouched
