"""The clients: ``SystemOneClient`` (threads) and ``AsyncSystemOneClient`` (tasks) over one core.

The clients construct and drive: a call is planned once and finished once by the core's
:class:`~jev_shared.planning.Planner` (options checked, questions prepared, what the surface cannot
carry refused, one flow per question built; the first error in question order, or the assembled
response), and between the two its flows are driven on threads (sync) or tasks (async).
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, Unpack

from . import drive, served, transport
from .answers import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse
from .backend import Backend
from .calibration import Calibrator
from .calls import Call, Reply
from .decision_sets import DecisionSets, attach_sets
from .errors import ClientCapabilityError
from .hosted import systemone_client
from .keywords import Keywords
from .memory import Memory
from .options import Options
from .orders import combined, reversed_questions
from .planning import CallOptions, Plan, Planner
from .preparation import PREPARE_STATE, Preparation
from .questions import Choice, Noul, Score
from .redact import remember_secrets
from .surfaces.registry import SURFACES, has_path, speaks


class _ClientCore:
    """What both clients are built from: the SDK client and a few typed values (the public clients keep their
    keywords: :class:`~jev_shared.keywords.Keywords` turns them into these). A call is planned and finished by
    the core's :class:`~jev_shared.planning.Planner`; the clients drive it."""

    def __init__(self, client: Any, options: Options, backend: Backend | None = None, memory: Memory | None = None,
                 calibrator: Calibrator | str | None = "auto",
                 sets: DecisionSets | Mapping[str, DecisionSets] | None = None) -> None:
        api = options.api
        if client is None and api == "systemone":
            client = systemone_client()
        client = served.attach(client, api)  # vLLM, SGLang: their /tokenize, so the labels' own tokens are read
        #: What the engine knows about where the client sends (backend.py): given, attached, or nothing.
        self.backend = backend if backend is not None else Backend.of(client)
        spoken = speaks(client, self.backend.surfaces)
        _check_client(client, api, spoken)
        remember_secrets(transport.client_secrets(client))  # redacted from every error, log and debug text
        #: The server's own KV cache of zero-shot prompts (LocalServer's ``slots.SlotCache``), or None.
        self._slots = self.backend.slots
        self.client = _plain_client(client)
        #: What this client learns (and what it was given): shareable, saved by ``Memory`` itself. By default
        #: a LocalServer client uses the per-user cache (``Memory.user_cache()``), any other a fresh one.
        self.memory = memory if memory is not None else Memory.user_cache() if self.backend.user_cache else Memory()
        self._memory = self.memory.for_backend(self.backend.fingerprint(client))
        self._planner = Planner(options, self.backend, self._memory, spoken, calibrator, sets)
        #: The transport's retry and backoff (tests and tools may tune it).
        self.retry_policy = self.options.retry_policy

    @property
    def options(self) -> Options:
        """The client's options (``debias="auto"`` resolved for its model); each call derives its own."""
        return self._planner.options

    # the settings integrations and tools read; the full set is ``options``
    model = property(lambda self: self.options.model)
    method = property(lambda self: self.options.method)
    mode = property(lambda self: self.options.mode)
    api = property(lambda self: self.options.api)
    confidence = property(lambda self: self.options.confidence)
    max_concurrency = property(lambda self: self.options.max_concurrency)
    timeout = property(lambda self: self.options.timeout)
    debug = property(lambda self: self.options.debug)

    @property
    def calibrator(self) -> Calibrator | None:
        """Applied to every answer: the model's shipped calibration ("auto"), the caller's, or None; the router,
        gate, guard and selectors take it through this client."""
        return self._planner.calibrator

    @calibrator.setter
    def calibrator(self, value: Calibrator | None) -> None:
        self._planner.calibrator = value

    @property
    def sets(self) -> DecisionSets | Mapping[str, DecisionSets] | None:
        """Conformal decision sets (decision_sets.py), for every question or per question id, or None."""
        return self._planner.sets

    @sets.setter
    def sets(self, value: DecisionSets | Mapping[str, DecisionSets] | None) -> None:
        self._planner.sets = value

    @property
    def _own_calibrations(self) -> dict[Any, Calibrator]:
        return self._planner.own_calibrations

    def _plans(self, state: Any, questions: Mapping[str, Any], debug: bool | None, options: Any) -> list[Plan]:
        """The call's plan, and where a question is asked in both orders a second one for those questions reversed, each
        with every example it is asked with (its own, the client's, the call's) in reverse order (:mod:`orders`)."""
        plan = self._planner.plan(state, questions, debug=debug, **options)
        order = self.options.order
        if order == "listed" or self.options.hosted or order == "auto" and not self.backend.orders:
            return [plan]
        flipped = reversed_questions(questions, plan.preps, auto=order == "auto")
        if not flipped:
            return [plan]
        rest = {k: v for k, v in options.items() if k != "examples"}  # carried by the reversed questions
        return [plan, self._planner.plan(state, flipped, debug=debug, shared=False, **rest)]

    def _finish(self, plans: list[Plan], outcomes: list[Any]) -> SystemOneResponse:
        """One response: the plan's, with each choice's two orders combined where there is a second plan."""
        n = len(plans[0].flows)
        resp = self._planner.finish(plans[0], outcomes[:n])
        if len(plans) == 1:
            return resp
        resp = combined(resp, self._planner.finish(plans[1], outcomes[n:]), self.options.confidence)
        return resp if self.sets is None else resp.model_copy(update={"answers": attach_sets(resp.answers, self.sets)})

    def check(self, questions: Mapping[str, Any], *, state: Any = None, **options: Unpack[CallOptions]) -> None:
        """Raise what :meth:`system_one` would raise before sending anything (no I/O): the questions, the
        state when given, the per-call options, and what the surface cannot carry."""
        self._planner.check(questions, state, **options)

    def preview(self, state: Any, questions: Mapping[str, Any], **options: Unpack[CallOptions]) -> list[dict[str, Any]]:
        """The first request each question would send (a choice asked in both orders: each order's, the reversed
        marked ``"order": "reversed"``), and its input tokens where the server can count them (the only I/O: the
        server's own tokenizer, where the client carries one; no decision call)."""
        plans = self._plans(state, questions, False, options)
        out = self._planner.preview_plan(plans[0])
        return out + [{**call, "order": "reversed"} for plan in plans[1:] for call in self._planner.preview_plan(plan)]


#: guards every client's lazily built thread pool
_POOL_LOCK = threading.Lock()


class SystemOneClient(Keywords, _ClientCore):
    """Typed decisions from any OpenAI-compatible chat client (sync).

    >>> client = SystemOneClient(openai.OpenAI(), model="gpt-4o-mini")
    >>> client.system_one(state="...", questions={"team": Choice(instructions="...", criteria={...})})
    """

    def system_one(self, state: Any, questions: Mapping[str, Any], *, debug: bool | None = None,
                   **options: Unpack[CallOptions]) -> SystemOneResponse:
        """Answer every question about ``state``; answers keep question order. ``options`` (method, mode,
        labels, examples, timeout, layout, top_logprobs, max_concurrency) set this call only."""
        plans = self._plans(state, questions, debug, options)
        plan = plans[0]
        send: Callable[[Call], Reply] = partial(transport.send, self.client, policy=self.retry_policy,
                                                budget=plan.budget)
        slots = self._slots
        if slots is not None:
            send = slots.wrap(send, plans[0].first_requests(*plans[1:]))
        flows = [f for p in plans for f in p.flows]
        pool = self._pool(plan.concurrency) if len(flows) > 1 or plan.budget.deadline is not None else None
        try:
            outcomes = drive.run_flows(flows, send, scout=plan.scout, budget=plan.budget,
                                       max_concurrency=plan.concurrency, pool=pool)
            if slots is not None and slots.pending:
                slots.settle()  # a kept prompt no prior asked: its twin, once the flows have ended (slots.py)
            return self._finish(plans, outcomes)
        finally:
            self.memory.flush()

    def _pool(self, workers: int) -> ThreadPoolExecutor:
        """The client's worker threads (built once, grown when a call asks for more), shut down with the client."""
        with _POOL_LOCK:
            pool, size = self.__dict__.get("_threads", (None, 0))
            if pool is None or size < workers:
                if pool is not None:
                    pool.shutdown(wait=False)
                pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jev")
                self.__dict__["_threads"] = (pool, workers)
                weakref.finalize(self, pool.shutdown, wait=False)
            return pool

    def prepare(self, questions: Mapping[str, Any], *, state: Any = None,
                **options: Unpack[CallOptions]) -> Preparation:
        """Pay every one-time cost now (surface and method discovery, tokenizer aliases, debias priors),
        not in a user's first request: one decision about ``state`` (default: a content-free one)."""
        if self.options.hosted:
            self.check(questions, state=state, **options)
            return Preparation.nothing(questions)
        started = time.perf_counter()
        resp = self.system_one(PREPARE_STATE if state is None else state, questions, **options)
        return Preparation.of(resp, time.perf_counter() - started)

    def choice(self, state: Any, instructions: str, criteria: Mapping[str, str], **kw: Any) -> ChoiceAnswer:
        return _only(self.system_one(state, *_single("choice", instructions, criteria), **kw))  # type: ignore[return-value]

    def score(self, state: Any, instructions: str, criteria: list[str] | Mapping[str, str], **kw: Any) -> ScoreAnswer:
        return _only(self.system_one(state, *_single("score", instructions, criteria), **kw))  # type: ignore[return-value]

    def noul(self, state: Any, instructions: str, criteria: Mapping[str, str] | None = None, **kw: Any) -> NoulAnswer:
        return _only(self.system_one(state, *_single("noul", instructions, criteria), **kw))  # type: ignore[return-value]


class AsyncSystemOneClient(Keywords, _ClientCore):
    """The async twin of :class:`SystemOneClient`, over an async client (``openai.AsyncOpenAI``)."""

    #: Requests in flight at once across all of this client's calls (None: its connection pool's size, at
    #: most ``transport.MAX_IN_FLIGHT``); the rest wait here, where the call's deadline still ends them.
    max_in_flight: int | None = None

    def _in_flight(self) -> asyncio.Semaphore:
        """The client's bound on requests in flight, one per event loop (a semaphore binds to its loop)."""
        loop = asyncio.get_running_loop()
        sems: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = self.__dict__.setdefault(
            "_in_flight_sems", weakref.WeakKeyDictionary())
        sem = sems.get(loop)
        if sem is None:
            sem = sems[loop] = asyncio.Semaphore(self.max_in_flight or transport.in_flight_limit(self.client))
        return sem

    async def system_one(self, state: Any, questions: Mapping[str, Any], *, debug: bool | None = None,
                         **options: Unpack[CallOptions]) -> SystemOneResponse:
        """Answer every question about ``state``; answers keep question order (options as the sync twin's)."""
        plans = self._plans(state, questions, debug, options)
        plan = plans[0]
        sem = asyncio.Semaphore(plan.concurrency)
        send: Callable[[Call], Awaitable[Reply]] = partial(transport.asend, self.client, policy=self.retry_policy,
                                                           budget=plan.budget)
        slots = self._slots
        if slots is not None:
            send = slots.awrap(send, plans[0].first_requests(*plans[1:]))
        jobs = [partial(drive.adrive, flow, send, sem, self._in_flight()) for p in plans for flow in p.flows]
        try:
            outcomes = await drive.run_tasks(jobs, scout=plan.scout, budget=plan.budget)
            if slots is not None and slots.pending:
                await asyncio.to_thread(slots.settle)  # its twin requests stay off the event loop
            return self._finish(plans, outcomes)
        finally:
            if self.memory.dirty and self.memory.path is not None:
                await asyncio.to_thread(self.memory.flush)  # a file write stays off the event loop

    async def aprepare(self, questions: Mapping[str, Any], *, state: Any = None,
                       **options: Unpack[CallOptions]) -> Preparation:
        """:meth:`SystemOneClient.prepare` for the async client."""
        if self.options.hosted:
            self.check(questions, state=state, **options)
            return Preparation.nothing(questions)
        started = time.perf_counter()
        resp = await self.system_one(PREPARE_STATE if state is None else state, questions, **options)
        return Preparation.of(resp, time.perf_counter() - started)

    async def choice(self, state: Any, instructions: str, criteria: Mapping[str, str], **kw: Any) -> ChoiceAnswer:
        return _only(await self.system_one(state, *_single("choice", instructions, criteria), **kw))  # type: ignore[return-value]

    async def score(self, state: Any, instructions: str, criteria: list[str] | Mapping[str, str],
                    **kw: Any) -> ScoreAnswer:
        return _only(await self.system_one(state, *_single("score", instructions, criteria), **kw))  # type: ignore[return-value]

    async def noul(self, state: Any, instructions: str, criteria: Mapping[str, str] | None = None,
                   **kw: Any) -> NoulAnswer:
        return _only(await self.system_one(state, *_single("noul", instructions, criteria), **kw))  # type: ignore[return-value]


_KINDS: dict[str, Callable[..., Any]] = {"choice": Choice, "score": Score, "noul": Noul}


def _single(kind: str, instructions: str, criteria: Any) -> tuple[dict[str, Any]]:
    """The one-question map of the ``choice`` / ``score`` / ``noul`` helpers, keyed by the kind."""
    criteria = dict(criteria) if isinstance(criteria, Mapping) else criteria
    return ({kind: _KINDS[kind](instructions=instructions, criteria=criteria)},)


def _only(resp: SystemOneResponse) -> Answer:
    return next(iter(resp.answers.values()))


def _check_client(client: Any, api: str, spoken: tuple[str, ...]) -> None:
    if api == "auto" and not spoken:
        raise ClientCapabilityError(
            f"{type(client).__name__} has none of chat.completions.create, responses.create or messages.create; "
            "pass an OpenAI-compatible client (or api='systemone' / 'decisions')")
    if api != "auto" and not has_path(client, api):
        raise ClientCapabilityError(
            f"api={api!r} needs {type(client).__name__}.{'.'.join(SURFACES[api].path)}, which it does not have; "
            f"pass the surface it speaks explicitly: one of {list(spoken) or ['systemone']}")


def _plain_client(client: Any) -> Any:
    """Switch the openai SDK's own retries off, so they do not multiply with ours."""
    with_options = getattr(client, "with_options", None)
    if callable(with_options):
        try:
            return with_options(max_retries=0)
        except TypeError:
            return client
    return client
