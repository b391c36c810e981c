"""Drive: run flows, sending their calls, on threads (sync) or tasks (async).

:func:`drive` and :func:`adrive` are the only loops between a flow and the transport, shared by
per-question, hosted and scout flows. :func:`run_threads` and :func:`run_tasks` carry the call's
rules once: the first question alone while the surface is unknown (the scout), the total
timeout (after which no request leaves), and every outcome kept so the first error in question
order is the one reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
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


def run_threads(jobs: Sequence[Callable[[], T]], *, scout: bool, budget: Budget,
                max_concurrency: int, pool: ThreadPoolExecutor | None = None) -> list[Outcome]:
    """Each job on a worker thread of ``pool`` (the client's: none is built per call; in a copy of the caller's
    context, so tracing reaches it), at most ``max_concurrency`` of the call's at once. One question without a
    deadline runs on the caller's thread."""
    if len(jobs) == 1 and budget.deadline is None:
        return [_outcome(jobs[0])]
    own = pool is None
    if pool is None:
        pool = ThreadPoolExecutor(max_workers=min(max_concurrency, len(jobs)), thread_name_prefix="jev")
    gate = threading.BoundedSemaphore(max_concurrency) if max_concurrency < len(jobs) else None
    outcomes: list[Outcome] = [None] * len(jobs)
    futures: dict[int, Future[Outcome]] = {}
    try:
        for wave in waves(len(jobs), scout):
            futures = {i: pool.submit(contextvars.copy_context().run, _outcome, jobs[i], gate) for i in wave}
            _wait_wave(list(futures.values()), budget)
            for i, future in futures.items():
                outcomes[i] = future.result()
            if any(isinstance(outcomes[i], BaseException) for i in wave):
                break  # a failed scout is the call's first error: the rest are not sent
    finally:
        for future in futures.values():
            future.cancel()  # those not started (a timed-out call): they never send
        if own:
            pool.shutdown(wait=False, cancel_futures=True)
    return outcomes


def _wait_wave(futures: list[Future[Outcome]], budget: Budget) -> None:
    """Until every future is done (each keeps its own error, so the first in question order is
    reported), or the budget runs out (then DecisionTimeoutError)."""
    wait(futures, timeout=budget.left())
    if any(not f.done() for f in futures):
        raise timed_out(budget)


def _outcome(job: Callable[[], T], gate: threading.BoundedSemaphore | None = None) -> Outcome:
    try:
        if gate is None:
            return job()
        with gate:
            return job()
    except Exception as exc:  # noqa: BLE001 - kept as the question's outcome, raised in question order
        return exc


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
