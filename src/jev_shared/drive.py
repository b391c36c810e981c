"""Drive: run flows, sending their calls, on worker threads (sync) or tasks (async).

:func:`drive`, :func:`adrive` and :func:`run_flows` are the only loops between a flow and the transport, shared
by per-question, hosted and scout flows. :func:`run_flows` and :func:`run_tasks` carry the call's
rules once: the first question alone while the surface is unknown (the scout), the total
timeout (after which no request leaves), and every outcome kept so the first error in question
order is the one reported. The sync driver's :class:`Pace` keeps, per client pool, whether the server answers
about as fast as we post (then one request at a time on the caller's thread: no thread hand-offs).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import weakref
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
    their posts only, not for planning and readout as well (eight questions cost up to 1.5x eight
    one-question calls when each worker ran a whole flow). Without a deadline the caller's thread sends the
    last request that fits itself (one question, or one at a time: no worker thread at all), and every
    request while the client's server answers about as fast as we post (:class:`Pace`)."""
    if len(flows) == 1 and budget.deadline is None:  # the common call: 7 K instructions here, 24 K via _Wave
        try:
            return [drive(flows[0], send)]
        except Exception as exc:  # noqa: BLE001 - the question's outcome
            return [exc]
    outcomes: list[Outcome] = [None] * len(flows)
    pace = pace_of(pool) if pool is not None and budget.deadline is None else None
    own = pool is None
    if own:
        pool = ThreadPoolExecutor(max_workers=min(max_concurrency, len(flows)), thread_name_prefix="jev")
    try:
        for wave in waves(len(flows), scout):
            _Wave(flows, send, budget, outcomes, pool, pace).run(wave, max(1, max_concurrency))
            if any(isinstance(outcomes[i], BaseException) for i in wave):
                break  # a failed scout is the call's first error: the rest are not sent
    finally:
        if own and pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return outcomes


#: One at a time stays while the wave's posts so far took at most FAST_FACTOR times the CPU they took on the
#: caller's thread (plus FAST_SLACK_S): the server's share is no more than ours, so one at a time takes at most
#: twice the wall of the GIL-bound parallel send, with no thread hand-offs (~17 context switches a request
#: idle). Summed over the wave, so one preempted post among fast ones does not end it; a slow first one does.
FAST_FACTOR, FAST_SLACK_S = 2.0, 0.0002
#: A parallel wave whose wall time was at most BOUND_FACTOR times its posts' CPU was CPU-bound: the server's
#: time hid in ours (against a 20 ms server eight posts take ~21 ms wall for ~7 ms of CPU: never tried).
BOUND_FACTOR = 1.5
#: After a try found the server slow, the CPU-bound waves to see before the next try: doubles to this.
MAX_BACKOFF = 64


class Pace:
    """What a pool's calls learnt of their server: whether posts go one at a time on the caller's thread (it
    answers about as fast as we post), and how many CPU-bound waves to pass before trying that again after a
    try found it slow (one extra round trip that call: the first post alone, the rest in parallel)."""

    def __init__(self) -> None:
        self.serial, self.wait, self.backoff = False, 0, 1

    def cpu_bound(self) -> None:
        if self.wait:
            self.wait -= 1
        else:
            self.serial = True

    def slow(self) -> None:
        self.serial, self.backoff = False, min(2 * self.backoff, MAX_BACKOFF)
        self.wait = self.backoff


#: each client pool's pace (a pool built for one call has none)
_PACES: weakref.WeakKeyDictionary[Executor, Pace] = weakref.WeakKeyDictionary()


def pace_of(pool: Executor) -> Pace:
    pace = _PACES.get(pool)
    if pace is None:
        pace = _PACES[pool] = Pace()
    return pace


#: what a worker puts on ``landed``: (question, reply or fault, error, the post's CPU seconds on its thread)
Landed = tuple[int, Reply | ProviderError | None, BaseException | None, float]


class _Wave:
    """One wave's flows: their requests ready to send (in the order they asked), those in flight, and what
    each flow ended with (written into the call's ``outcomes``)."""

    def __init__(self, flows: Sequence[Flow[Any]], send: Callable[[Call], Reply], budget: Budget,
                 outcomes: list[Outcome], pool: Executor | None, pace: Pace | None = None) -> None:
        self.flows, self.send, self.budget, self.outcomes, self.pool = flows, send, budget, outcomes, pool
        self.ready: deque[tuple[int, Call]] = deque()
        #: question → its request on a worker thread; the worker puts what came of it on ``landed`` (one
        #: queue, not ``wait()`` over the futures: that takes every future's lock each time)
        self.in_flight: dict[int, Future[None]] = {}
        self.landed: SimpleQueue[Landed] = SimpleQueue()
        #: None: nothing learnt (a deadline, or a pool of the call's own); ``serial``: posts sent here
        self.pace, self.serial = pace, pace is not None and pace.serial
        self.posts, self.cpu = 0, 0.0  # requests sent, and the workers' CPU for theirs
        self.here = [0.0, 0.0]  # wall and CPU seconds of the posts sent here while serial

    def run(self, wave: range, limit: int) -> None:
        """Until every flow of the wave has ended, or the budget ran out (then DecisionTimeoutError)."""
        started, mine = time.perf_counter(), time.thread_time()
        for i in wave:
            self._step(i, None)
        try:
            while self.ready or self.in_flight:
                self._start(limit)
                if self.in_flight:
                    self._take(block=True)
        except BaseException:
            self.budget.cancel()  # no question of the call sends again
            raise
        finally:
            for future in self.in_flight.values():
                future.cancel()  # those not started (a timed-out call): they never send
        if self.pace is not None and self.posts > 1:
            self._learn(self.pace, time.perf_counter() - started, time.thread_time() - mine + self.cpu)

    def _learn(self, pace: Pace, wall: float, cpu: float) -> None:
        """After a wave of two posts or more: a serial one was fast throughout; a parallel one was CPU-bound."""
        if self.serial:
            pace.backoff = 1
        elif not pace.serial and wall <= BOUND_FACTOR * cpu:
            pace.cpu_bound()

    def _take(self, block: bool) -> None:
        """Take every request that has landed; with ``block``, wait for one first (at most what is left of the
        budget, then DecisionTimeoutError)."""
        try:
            if block:
                left = self.budget.left()
                item = self.landed.get(timeout=None if left is None else max(left, 0.0))
            else:
                item = self.landed.get_nowait()
        except Empty:
            if block:
                raise timed_out(self.budget) from None
            return
        while True:
            i, outcome, error, cpu = item
            del self.in_flight[i]
            self.cpu += cpu
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
        thread, which would otherwise only wait (one question, or one at a time: no worker thread at all), and
        every one while the pace is serial."""
        while self.ready and len(self.in_flight) < limit:
            i, call = self.ready.popleft()
            self.posts += 1
            last = not self.ready or len(self.in_flight) + 1 == limit
            if self.pool is None or (self.budget.deadline is None and (last or self.serial)):
                self._send_here(i, call)
                if self.in_flight:
                    self._take(block=False)  # what landed meanwhile frees its slot and goes on
            else:
                self.in_flight[i] = self.pool.submit(contextvars.copy_context().run, _post, self.send, call, i,
                                                     self.landed)

    def _send_here(self, i: int, call: Call) -> None:
        """Send on this thread; while serial, slow replies send the rest in parallel (and tell the pace)."""
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            outcome = _sent(self.send, call)
        except Exception as exc:  # noqa: BLE001 - the question's outcome, raised in question order
            self.outcomes[i] = exc
            return
        finally:
            if self.serial and self.pace is not None:
                self.here[0] += time.perf_counter() - started
                self.here[1] += time.thread_time() - cpu
                if self.here[0] > FAST_FACTOR * self.here[1] + FAST_SLACK_S:
                    self.serial = False
                    self.pace.slow()
        self._step(i, outcome)

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


def _post(send: Callable[[Call], Reply], call: Call, i: int, landed: SimpleQueue[Landed]) -> None:
    """A worker thread's whole part: question ``i``'s request sent, and what came of it put on ``landed``."""
    cpu = time.thread_time()
    try:
        outcome = _sent(send, call)
    except BaseException as exc:  # noqa: BLE001 - the caller's thread decides (an Exception is the outcome)
        landed.put((i, None, exc, time.thread_time() - cpu))
        raise
    landed.put((i, outcome, None, time.thread_time() - cpu))


async def run_tasks(jobs: Sequence[Callable[[], Awaitable[T]]], *, scout: bool, budget: Budget) -> list[Outcome]:
    """Each job as a task; the budget bounds them all (then DecisionTimeoutError), by the wall clock.

    On timeout the tasks are cancelled and left to unwind on their own: waiting for them (as
    ``asyncio.wait_for`` does) would let a starved connection pool hold the caller past its deadline.
    """
    outcomes: list[Outcome] = [None] * len(jobs)
    for wave in waves(len(jobs), scout):
        loop = asyncio.get_running_loop()
        tasks = [asyncio.ensure_future(jobs[i]()) for i in wave]
        left = budget.left()
        try:
            pending = await _pending(loop, tasks, None if left is None else max(left, 0.0))
        except BaseException:  # the caller was cancelled: so are its questions (no request leaves after)
            _abandon(tasks, budget)
            raise
        if pending:  # every task of the wave: one that failed before the deadline is read too (else asyncio logs
            _abandon(tasks, budget)  # "Task exception was never retrieved" when it is collected)
            raise timed_out(budget)
        for i, task in zip(wave, tasks):
            outcomes[i] = _outcome_of(task)
        if any(isinstance(outcomes[i], BaseException) for i in wave):
            break
    return outcomes


async def _pending(loop: asyncio.AbstractEventLoop, tasks: list[asyncio.Task[Any]],
                   timeout: float | None) -> list[asyncio.Task[Any]]:
    """The tasks not done once all are or ``timeout`` passed: ``asyncio.wait``'s wait for all of them, without its
    sets, its counter closure and its checks of what it is given (a tenth of the engine's CPU per decision beside
    the post, for the one task a question has)."""
    if not tasks:
        return []
    waiter = loop.create_future()
    left = [len(tasks)]

    def landed(_: Any) -> None:
        left[0] -= 1
        if left[0] <= 0 and not waiter.done():
            waiter.set_result(None)

    def late() -> None:
        if not waiter.done():
            waiter.set_result(None)

    handle = None if timeout is None else loop.call_later(timeout, late)
    for task in tasks:
        task.add_done_callback(landed)
    try:
        await waiter
    finally:
        if handle is not None:
            handle.cancel()
        for task in tasks:
            task.remove_done_callback(landed)
    return [task for task in tasks if not task.done()]


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
