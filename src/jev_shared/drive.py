"""Drive: run flows, sending their calls, on worker threads (sync) or tasks (async).

:func:`drive`, :func:`adrive` and :func:`run_flows` are the only loops between a flow and the transport, shared
by per-question, hosted and scout flows. :func:`run_flows` and :func:`run_tasks` carry the call's
rules once: the first question alone while the surface is unknown (the scout), the total
timeout (after which no request leaves), and every outcome kept so the first error in question
order is the one reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from queue import Empty, SimpleQueue
from typing import Any, TypeVar

from .calls import Budget, Call, Flow, Reply
from .errors import DecisionTimeoutError, ProviderError

T = TypeVar("T")
#: A question's result, or the exception that ended it.
Outcome = Any


def drive(flow: Flow[T], send: Callable[[Call], Reply]) -> T:
    """Run one flow to its end: each call it yields is sent, each reply (or ProviderError) goes back in."""
    try:
        call = next(flow)
        while True:
            try:
                outcome: Reply | ProviderError = send(call)
            except ProviderError as exc:
                outcome = exc
            call = _resume(flow, outcome)
    except StopIteration as stop:
        return stop.value


async def adrive(flow: Flow[T], asend: Callable[[Call], Awaitable[Reply]], sem: asyncio.Semaphore,
                 pool: asyncio.Semaphore | None = None) -> T:
    """:func:`drive` for async I/O; ``sem`` bounds the call's requests in flight, ``pool`` the client's
    (all its calls'), so no more wait in the SDK's connection pool than it can send at once."""
    try:
        call = next(flow)
        while True:
            async with sem, pool or contextlib.nullcontext():
                try:
                    outcome: Reply | ProviderError = await asend(call)
                except ProviderError as exc:
                    outcome = exc
            call = _resume(flow, outcome)
    except StopIteration as stop:
        return stop.value


def _resume(flow: Flow[Any], outcome: Reply | ProviderError) -> Call:
    """The flow's next call, given its last one's reply, or the error thrown in where it was asked."""
    return flow.throw(outcome) if isinstance(outcome, ProviderError) else flow.send(outcome)


def waves(n: int, scout: bool) -> list[range]:
    """The first question alone when the surface is unknown, then the rest."""
    return [range(0, 1), range(1, n)] if scout and n > 1 else [range(0, n)]


def timed_out(budget: Budget) -> DecisionTimeoutError:
    budget.cancel()  # no question may send another request for a call that has failed
    return DecisionTimeoutError(f"the call's total timeout of {budget.timeout_s}s ran out")


def run_flows(flows: Sequence[Flow[T]], send: Callable[[Call], Reply], *, scout: bool, budget: Budget,
              max_concurrency: int, pool: Executor | None = None) -> list[Outcome]:
    """Every flow driven on the caller's thread (planning, readout, answers); only their requests go to
    ``pool``'s worker threads (the client's: none is built per call), each in a copy of the caller's context so
    tracing reaches it, at most ``max_concurrency`` of the call's at once. Worker threads hold the GIL for
    their posts only, not for planning and readout as well (issue 33: eight questions cost up to 1.5x eight
    one-question calls when each worker ran a whole flow). Without a deadline the caller's thread sends the
    last request that fits itself (one question, or one at a time: no worker thread at all)."""
    if len(flows) == 1 and budget.deadline is None:  # the common call: 2 µs here against 10 µs through _Wave
        try:
            return [drive(flows[0], send)]
        except Exception as exc:  # noqa: BLE001 - the question's outcome
            return [exc]
    outcomes: list[Outcome] = [None] * len(flows)
    own = pool is None and (len(flows) > 1 or budget.deadline is not None)
    if own:
        pool = ThreadPoolExecutor(max_workers=min(max_concurrency, len(flows)), thread_name_prefix="jev")
    try:
        for wave in waves(len(flows), scout):
            _Wave(flows, send, budget, outcomes, pool).run(wave, max(1, max_concurrency))
            if any(isinstance(outcomes[i], BaseException) for i in wave):
                break  # a failed scout is the call's first error: the rest are not sent
    finally:
        if own and pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return outcomes


class _Wave:
    """One wave's flows: their requests ready to send (in the order they asked), those in flight, and what
    each flow ended with (written into the call's ``outcomes``)."""

    def __init__(self, flows: Sequence[Flow[Any]], send: Callable[[Call], Reply], budget: Budget,
                 outcomes: list[Outcome], pool: Executor | None) -> None:
        self.flows, self.send, self.budget, self.outcomes, self.pool = flows, send, budget, outcomes, pool
        self.ready: deque[tuple[int, Call]] = deque()
        #: question → its request on a worker thread; the worker puts (question, reply or fault, error) on
        #: ``landed`` (one queue, not ``wait()`` over the futures: that takes every future's lock each time)
        self.in_flight: dict[int, Future[None]] = {}
        self.landed: SimpleQueue[tuple[int, Reply | ProviderError | None, BaseException | None]] = SimpleQueue()

    def run(self, wave: range, limit: int) -> None:
        """Until every flow of the wave has ended, or the budget ran out (then DecisionTimeoutError)."""
        for i in wave:
            self._step(i, None)
        try:
            while self.ready or self.in_flight:
                self._start(limit)
                if self.in_flight:
                    self._collect()
        except BaseException:
            self.budget.cancel()  # no question of the call sends again
            raise
        finally:
            for future in self.in_flight.values():
                future.cancel()  # those not started (a timed-out call): they never send

    def _collect(self) -> None:
        """Wait for one request to land (at most what is left of the budget), then take all that have."""
        left = self.budget.left()
        try:
            item = self.landed.get(timeout=None if left is None else max(left, 0.0))
        except Empty:
            raise timed_out(self.budget) from None
        while True:
            i, outcome, error = item
            del self.in_flight[i]
            if error is None:
                self._step(i, outcome)
            elif isinstance(error, Exception):  # not a provider's fault (those go back into the flow)
                self.outcomes[i] = error
            else:
                raise error
            try:
                item = self.landed.get_nowait()
            except Empty:
                return

    def _start(self, limit: int) -> None:
        """Send what is ready, up to ``limit`` in flight. Without a deadline the last that fits is sent on this
        thread, which would otherwise only wait (one question, or one at a time: no worker thread at all)."""
        while self.ready and len(self.in_flight) < limit:
            i, call = self.ready.popleft()
            last = not self.ready or len(self.in_flight) + 1 == limit
            if self.pool is None or (last and self.budget.deadline is None):
                try:
                    outcome = _sent(self.send, call)
                except Exception as exc:  # noqa: BLE001 - the question's outcome, raised in question order
                    self.outcomes[i] = exc
                else:
                    self._step(i, outcome)
            else:
                self.in_flight[i] = self.pool.submit(contextvars.copy_context().run, _post, self.send, call, i,
                                                     self.landed)

    def _step(self, i: int, outcome: Reply | ProviderError | None) -> None:
        """Resume flow ``i`` (start it when ``outcome`` is None): its next request is ready, or it has ended."""
        try:
            call = next(self.flows[i]) if outcome is None else _resume(self.flows[i], outcome)
        except StopIteration as stop:
            self.outcomes[i] = stop.value
        except Exception as exc:  # noqa: BLE001 - kept as the question's outcome, raised in question order
            self.outcomes[i] = exc
        else:
            self.ready.append((i, call))


def _sent(send: Callable[[Call], Reply], call: Call) -> Reply | ProviderError:
    """The reply, or the provider's fault to throw into the flow; anything else is raised."""
    try:
        return send(call)
    except ProviderError as exc:
        return exc


def _post(send: Callable[[Call], Reply], call: Call, i: int,
          landed: SimpleQueue[tuple[int, Reply | ProviderError | None, BaseException | None]]) -> None:
    """A worker thread's whole part: question ``i``'s request sent, and what came of it put on ``landed``."""
    try:
        outcome = _sent(send, call)
    except BaseException as exc:  # noqa: BLE001 - the caller's thread decides (an Exception is the outcome)
        landed.put((i, None, exc))
        raise
    landed.put((i, outcome, None))


async def run_tasks(jobs: Sequence[Callable[[], Awaitable[T]]], *, scout: bool, budget: Budget) -> list[Outcome]:
    """Each job as a task; the budget bounds them all (then DecisionTimeoutError), by the wall clock.

    On timeout the tasks are cancelled and left to unwind on their own: waiting for them (as
    ``asyncio.wait_for`` does) would let a starved connection pool hold the caller past its deadline.
    """
    outcomes: list[Outcome] = [None] * len(jobs)
    for wave in waves(len(jobs), scout):
        tasks = [asyncio.ensure_future(jobs[i]()) for i in wave]
        left = budget.left()
        try:
            _, pending = await asyncio.wait(tasks, timeout=None if left is None else max(left, 0.0))
        except BaseException:  # the caller was cancelled: so are its questions (no request leaves after)
            _abandon(tasks, budget)
            raise
        if pending:
            _abandon(pending, budget)
            raise timed_out(budget)
        for i, task in zip(wave, tasks):
            outcomes[i] = _outcome_of(task)
        if any(isinstance(outcomes[i], BaseException) for i in wave):
            break
    return outcomes


def _outcome_of(task: asyncio.Future[Any]) -> Outcome:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception() or task.result()


def _abandon(tasks: Any, budget: Budget) -> None:
    """Cancel ``tasks`` without waiting for them to unwind; no question of the call sends again."""
    budget.cancel()
    for task in tasks:
        if not task.done():
            task.cancel()
        task.add_done_callback(_consume)


def _consume(task: asyncio.Future[Any]) -> None:
    """Read a cancelled task's outcome so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


def first_error(outcomes: Sequence[Outcome]) -> BaseException | None:
    """The first question's error, in question order."""
    return next((o for o in outcomes if isinstance(o, BaseException)), None)
