"""The clients: ``SystemOneClient`` (threads) and ``AsyncSystemOneClient`` (tasks) over one core.

A call is planned once (options checked, questions prepared, what the surface cannot carry
refused, one flow per question built), run by the sync or async driver, and finished once
(first error in question order, or the assembled response).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, TypedDict, Unpack

from . import calibration, drive, served, transport
from .answers import Answer, ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse
from .backend import Backend
from .calibrating import calibrated
from .calibration import Calibrator
from .calls import Budget, Flow
from .decision_sets import DecisionSets, attach_sets
from .errors import ClientCapabilityError, InvalidQuestionError, UnsupportedMethodError
from .exact import TokenTable
from .flows import Ask, answer
from .hosted import hosted_flow, refuse_llm_options, systemone_client
from .keywords import Keywords
from .labels import answer_words, token_checked_aliases
from .layout import choose_layout
from .memory import Memory
from .methods import TOKEN_READOUT
from .models import debias_by_default
from .options import Options, check_timeout
from .preparation import PREPARE_STATE, Preparation, preview_calls
from .questions import Choice, Noul, Prepared, Score, prepare_questions
from .record import Record, assemble, hosted_records
from .redact import remember_secrets
from .registry import SURFACES, has_path, speaks


class CallOptions(TypedDict, total=False):
    """What one call may set beside its state and questions (each checked, then for this call only)."""

    method: str
    mode: str
    labels: str
    examples: Any
    timeout: float
    layout: str
    top_logprobs: int
    max_concurrency: int


@dataclass
class _Plan:
    """One call, ready to run: its questions, flows and records, and the budget they share."""

    preps: list[Prepared]
    flows: list[Flow[Any]]
    records: list[Record]
    scout: bool
    budget: Budget
    started: float
    debug: bool
    #: Requests in flight at once: 1 when layout="auto" shares the state (the next question must reach its slot).
    concurrency: int = 8
    layout: dict[str, Any] | None = None


def _first_token(tokenize: Callable[[str], Any], word: str) -> Any:
    ids = list(tokenize(word))
    return ids[0] if ids else None


class _ClientCore:
    """What both clients are built from: the SDK client and a few typed values (the public clients keep their
    keywords: :class:`~jev_shared.keywords.Keywords` turns them into these)."""

    def __init__(self, client: Any, options: Options, backend: Backend | None = None, memory: Memory | None = None,
                 calibrator: Calibrator | str | None = "auto",
                 sets: DecisionSets | Mapping[str, DecisionSets] | None = None) -> None:
        self.options = options
        api, model = options.api, options.model
        if client is None and api == "systemone":
            client = systemone_client()
        client = served.attach(client, api)  # vLLM, SGLang: their /tokenize, so the labels' own tokens are read
        #: What the engine knows about where the client sends (backend.py): given, attached, or nothing.
        self.backend = backend if backend is not None else Backend.of(client)
        by_model = self.backend.debias if self.backend.debias is not None else debias_by_default(model)
        if self.options.debias == "auto" and not by_model:  # the model's default, whoever built the client
            self.options = dataclasses.replace(self.options, debias=False)  # (models.py)
        self._speaks = speaks(client, self.backend.surfaces)
        _check_client(client, api, self._speaks)
        remember_secrets(transport.client_secrets(client))  # redacted from every error, log and debug text
        self._tokenize = self.backend.tokenize
        #: Where the server reads the labels' own tokens (LocalServer's llama.cpp): their ids, asked once (exact.py).
        self._token_table = TokenTable.of(self.backend.exact_readout, self._tokenize)
        #: The server's own KV cache of zero-shot prompts (LocalServer's ``slots.SlotCache``), or None.
        self._slots = self.backend.slots
        self._checked_aliases: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...] | None] = {}
        self.client = _plain_client(client)
        #: Applied to every answer: "auto" is the calibration shipped for the model (the embedded default
        #: has one), None none; the router, gate, guard and selectors take it through this client.
        self.calibrator = None if self.options.hosted else calibration.resolve(calibrator, model)
        #: "shipped" (calibrator="auto": then a question's own examples refine it) or "custom" (the caller's).
        self._calibration_name = "shipped" if isinstance(calibrator, str) else "custom"
        self._own_calibrations: dict[Any, Calibrator] = {}
        #: Conformal decision sets (decision_sets.py), for every question or per question id: each answer
        #: gets its ``decision_set`` (and ``abstains``); None: none.
        self.sets = sets
        #: The transport's retry and backoff (tests and tools may tune it).
        self.retry_policy = self.options.retry_policy
        #: What this client learns (and what it was given): shareable, saved by ``Memory`` itself. By default
        #: a LocalServer client uses the per-user cache (``Memory.user_cache()``), any other a fresh one.
        self.memory = memory if memory is not None else Memory.user_cache() if self.backend.user_cache else Memory()
        self._memory = self.memory.for_backend(self.backend.fingerprint(client))

    # the settings integrations and tools read; the full set is ``options``
    model = property(lambda self: self.options.model)
    method = property(lambda self: self.options.method)
    mode = property(lambda self: self.options.mode)
    api = property(lambda self: self.options.api)
    confidence = property(lambda self: self.options.confidence)
    max_concurrency = property(lambda self: self.options.max_concurrency)
    timeout = property(lambda self: self.options.timeout)
    debug = property(lambda self: self.options.debug)

    def _checked(self, state: Any, questions: Mapping[str, Any], *, method: str | None = None,
                 mode: str | None = None, labels: str | None = None, examples: Any = None,
                 timeout: float | None = None, layout: str | None = None, top_logprobs: int | None = None,
                 max_concurrency: int | None = None) -> tuple[Options, list[Prepared]]:
        """This call's options and prepared questions: everything validated before any request."""
        opts = self.options.for_call(method, mode, labels, layout=layout, top_logprobs=top_logprobs,
                                     max_concurrency=max_concurrency)
        check_timeout(timeout, InvalidQuestionError)
        preps = prepare_questions(state, questions, opts.method, opts.examples, examples, opts.labels)
        self._refuse_what_the_surface_cannot_carry(opts, examples)
        return opts, preps

    def _plan(self, state: Any, questions: Mapping[str, Any], *, debug: bool | None = None,
              **options: Any) -> _Plan:
        """Everything checked before any request, then one flow per question (or one hosted flow)."""
        opts, preps = self._checked(state, questions, **options)
        preps = self._token_checked(preps, opts)
        opts = self._exact(opts, preps)
        debug = opts.debug if debug is None else debug
        timeout = options.get("timeout")
        budget = Budget.of(opts.timeout if timeout is None else timeout)
        records = [Record(debug) for _ in preps]
        if opts.hosted:
            flows: list[Flow[Any]] = [hosted_flow(opts, preps, state, records[0])]
            return _Plan(preps, flows, records, False, budget, time.perf_counter(), debug)
        opts, concurrency, why = self._resolve_layout(opts, preps, state)
        flows = [answer(Ask(p, state, opts, self._memory, self._speaks, r)) for p, r in zip(preps, records)]
        scout = self._memory.needs_scout(opts.model, opts.api, self._speaks, len(preps))
        return _Plan(preps, flows, records, scout, budget, time.perf_counter(), debug, concurrency, why)

    def check(self, questions: Mapping[str, Any], *, state: Any = None, **options: Unpack[CallOptions]) -> None:
        """Raise what :meth:`system_one` would raise before sending anything (no I/O): the questions, the
        state when given, the per-call options, and what the surface cannot carry."""
        self._checked(PREPARE_STATE if state is None else state, questions, **options)

    def preview(self, state: Any, questions: Mapping[str, Any], **options: Unpack[CallOptions]) -> list[dict[str, Any]]:
        """The first request each question would send, and its input tokens where the server can count
        them (the only I/O: the server's own tokenizer, where the client carries one; no decision call)."""
        plan = self._plan(state, questions, debug=False, **options)
        return preview_calls(plan.preps, plan.flows, self._tokenize)

    def _token_checked(self, preps: list[Prepared], opts: Options) -> list[Prepared]:
        """Choice names the server's tokenizer does not tell apart at the first token get answer words
        it does (``labels.token_checked_aliases``), found once per option set; no tokenizer, no change."""
        tokenize = self._tokenize
        if tokenize is None or opts.labels != "names" or opts.hosted or opts.method not in (*TOKEN_READOUT, "auto"):
            return preps
        return [self._with_checked_aliases(p, tokenize) if p.kind == "choice" else p for p in preps]

    def _exact(self, opts: Options, preps: list[Prepared]) -> Options:
        """The answer words' token ids, where this server reads them exactly and a token readout may run."""
        if self._token_table is None or opts.hosted or opts.method not in ("logprobs", "auto"):
            return opts
        words = [w for p in preps for w in answer_words(p, opts.labels)]
        ids = self._token_table.ids(words)
        return opts.evolved(token_ids=ids, token_paths=self._token_table.paths(words)) if ids else opts

    def _with_checked_aliases(self, prep: Prepared, tokenize: Callable[[str], Any]) -> Prepared:
        key = (prep.keys, prep.descriptions)
        if key not in self._checked_aliases:
            try:
                first = partial(_first_token, tokenize)
                self._checked_aliases[key] = token_checked_aliases(prep.keys, prep.descriptions, first)
            except Exception:  # noqa: BLE001 - a tokenizer that fails leaves the names' own aliases
                self._checked_aliases[key] = None
        aliases = self._checked_aliases[key]
        return dataclasses.replace(prep, aliases=aliases) if aliases else prep

    def _resolve_layout(self, opts: Options, preps: list[Prepared], state: Any) -> tuple[Options, int, Any]:
        """layout="auto": state_last, or split with the questions in turn when that reads fewer tokens."""
        if opts.layout != "auto":
            return opts, opts.max_concurrency, None
        layout, why = choose_layout(preps, state, self._tokenize)
        concurrency = 1 if layout == "split" else opts.max_concurrency
        return opts.with_layout(layout), concurrency, why

    def _refuse_what_the_surface_cannot_carry(self, opts: Options, examples: Any) -> None:
        if opts.hosted:
            refuse_llm_options(opts, examples)
            return
        surface = self._memory.surface_for(opts.model, opts.method, opts.api, self._speaks)
        if opts.method in TOKEN_READOUT and not SURFACES[surface].logprobs:
            raise UnsupportedMethodError(
                f"method={opts.method!r} reads token logprobs, which {SURFACES[surface].title or surface} never returns; "
                "use method='structured' or method='discrete' (or 'auto')")
        if opts.method == "grammar" and opts.api != "auto" and not SURFACES[opts.api].grammar:
            takes = [name for name, s in SURFACES.items() if s.grammar]
            raise UnsupportedMethodError(
                f"grammar requires a surface that accepts a `grammar` field (llama.cpp and similar servers); "
                f"pass {' or '.join(f'api={name!r}' for name in takes)}")

    def _finish(self, plan: _Plan, outcomes: list[Any]) -> SystemOneResponse:
        """The first error in question order, or the response (and the model's surface is known from now on)."""
        records = plan.records
        if self.options.hosted:
            [outcome] = outcomes
            outcomes = [outcome] if isinstance(outcome, BaseException) else list(outcome)
            records = hosted_records(plan.preps, plan.records[0], self.options.api)
        error = drive.first_error(outcomes)
        if error is not None:
            raise error
        self._memory.mark_scouted(self.options.model)
        resp = assemble(self.options.model, plan.preps, outcomes, records, server_limits=self._memory.limits(
            self.options.model), started=plan.started, debug=plan.debug)
        if plan.layout and plan.layout.get("layout") and resp.debug is not None:  # assemble always gives a dict
            resp.debug["layout"] = plan.layout
        resp = resp if self.calibrator is None else calibrated(
            self.calibrator, self._calibration_name, self._own_calibrations, plan.preps, plan.records, resp)
        return resp if self.sets is None else resp.model_copy(update={"answers": attach_sets(resp.answers, self.sets)})


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
        plan = self._plan(state, questions, debug=debug, **options)
        send = partial(transport.send, self.client, policy=self.retry_policy, budget=plan.budget)
        if self._slots is not None:
            send = self._slots.wrap(send)
        jobs = [partial(drive.drive, flow, send) for flow in plan.flows]
        pool = self._pool(plan.concurrency) if len(jobs) > 1 or plan.budget.deadline is not None else None
        try:
            return self._finish(plan, drive.run_threads(jobs, scout=plan.scout, budget=plan.budget,
                                                        max_concurrency=plan.concurrency, pool=pool))
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
        plan = self._plan(state, questions, debug=debug, **options)
        sem = asyncio.Semaphore(plan.concurrency)
        send = partial(transport.asend, self.client, policy=self.retry_policy, budget=plan.budget)
        if self._slots is not None:
            send = self._slots.awrap(send)
        jobs = [partial(drive.adrive, flow, send, sem, self._in_flight()) for flow in plan.flows]
        try:
            return self._finish(plan, await drive.run_tasks(jobs, scout=plan.scout, budget=plan.budget))
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
