"""Planning a call: what is decided before its first request and after its last reply, for both clients.

A call is planned once: its options checked (once), its questions prepared, what the surface cannot carry refused,
the answer words' own tokens found where the server reads them exactly, the layout chosen, whether the first
question goes alone to learn the surface (the scout), and one flow per question built from its :class:`Ask`. It is
finished once: the first error in question order, or the response assembled, calibrated and given its decision
sets. The clients (:mod:`client`) construct a :class:`Planner` and drive its flows, on threads or on tasks; what a
question's flow asks on its way (the debias priors and their twins, a read-on) it decides from the replies it is
sent (:mod:`flows`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any, TypedDict, TypeVar

from . import calibration, drive
from .answers import SystemOneResponse
from .backend import Backend
from .calibration import Calibrator
from .calibration.policy import calibrated
from .calls import PLANNING, Budget, Call, Flow, Reply
from .decision_sets import DecisionSets, attach_sets, sets_for
from .errors import InvalidQuestionError, UnsupportedMethodError
from .exact import TokenTable
from .flows import Ask, answer
from .hosted import hosted_flow, refuse_llm_options
from .labels import answer_words, token_checked_aliases
from .layout import choose_layout
from .memory import BackendMemory
from .methods import TOKEN_READOUT
from .models import debias_by_default
from .options import Options, check_timeout
from .preparation import PREPARE_STATE, preview_calls
from .questions import Prepared, prepare_questions
from .record import Record, assemble, hosted_records
from .surfaces.registry import SURFACES

T = TypeVar("T")
#: The most option sets one planner keeps (each a call's own values: a client sees few).
_KEPT_CALL_OPTIONS = 64


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
class Plan:
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

    def first_requests(self, *others: Plan) -> list[Call]:
        """Each flow's first request, of this plan and of ``others`` driven with it (a call's choices reversed),
        taken now (a flow does no I/O) where they all leave at once (two or more, no scout wave, none held back by
        ``concurrency``); the flows then yield them first, as they would have. Empty otherwise. The kept prompts
        (local/slots.py) order a first decision's requests by them."""
        plans = (self, *others)
        flows = sum(len(p.flows) for p in plans)
        if any(p.scout for p in plans) or flows < 2 or self.concurrency < flows:
            return []
        firsts: list[Call] = []
        for plan in plans:
            for i, flow in enumerate(plan.flows):
                try:
                    call = next(flow)
                except BaseException as exc:  # noqa: BLE001 - the flow ended before asking: it ends so when driven
                    plan.flows[i] = _ended(exc)
                else:
                    firsts.append(call)
                    plan.flows[i] = _resumed(call, flow)
        return firsts


def resolved(options: Options, backend: Backend) -> Options:
    """``debias="auto"`` made the model's default (the backend's where it says, else models.py's), whoever built
    the client: the client's options, with which questions a call divides by content-free priors."""
    by_model = backend.debias if backend.debias is not None else debias_by_default(options.model)
    return dataclasses.replace(options, debias=False) if options.debias == "auto" and not by_model else options


class Planner:
    """A client's calls, planned and finished: its options, the surfaces the client speaks, the backend's tokenizer
    and exact readout, what the client learned of the backend (``memory``), its calibration and decision sets."""

    def __init__(self, options: Options, backend: Backend, memory: BackendMemory, speaks: tuple[str, ...],
                 calibrator: Calibrator | str | None = "auto",
                 sets: DecisionSets | Mapping[str, DecisionSets] | None = None) -> None:
        self.options = resolved(options, backend)
        self.memory = memory
        self.speaks = speaks
        self.tokenize = backend.tokenize
        #: The server's kept prompts (local/slots.py), or None: a prompt whose debias prior did not keep it is kept
        #: when the call is finished.
        self.slots = backend.slots
        #: Where the server reads the labels' own tokens (LocalServer's llama.cpp): their ids, asked once (exact.py).
        self.token_table = TokenTable.of(backend.exact_readout, self.tokenize, backend.pieces)
        self._checked_aliases: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[str, ...] | None] = {}
        #: Applied to every answer: "auto" is the calibration shipped for the model (the embedded default
        #: has one), None none; the router, gate, guard and selectors take it through the client.
        self.calibrator = None if self.options.hosted else calibration.resolve(calibrator, self.options.model)
        #: "shipped" (calibrator="auto": then a question's own examples refine it) or "custom" (the caller's).
        self.calibration_name = "shipped" if isinstance(calibrator, str) else "custom"
        self.own_calibrations: dict[Any, Calibrator] = {}
        #: Conformal decision sets (decision_sets.py), for every question or per question id: each answer
        #: gets its ``decision_set`` (and ``abstains``); None: none.
        self.sets = sets
        #: ``options.for_call``'s results, for the options they were derived from (:meth:`_for_call`).
        self._call_options: tuple[Options, dict[tuple[Any, ...], Options]] = (self.options, {})

    def checked(self, state: Any, questions: Mapping[str, Any], *, method: str | None = None,
                mode: str | None = None, labels: str | None = None, examples: Any = None,
                timeout: float | None = None, layout: str | None = None, top_logprobs: int | None = None,
                max_concurrency: int | None = None, shared: bool = True) -> tuple[Options, list[Prepared]]:
        """This call's options and prepared questions: everything validated before any request (``shared``: the
        client's own examples merged in; False where the questions carry them already, reversed: orders.py)."""
        opts = self._for_call(method, mode, labels, layout, top_logprobs, max_concurrency)
        check_timeout(timeout, InvalidQuestionError)
        preps = prepare_questions(state, questions, opts.method, opts.examples if shared else None, examples,
                                  opts.labels)
        self._refuse_what_the_surface_cannot_carry(opts, examples)
        self._refuse_sets_of_other_options(preps)
        return opts, preps

    def _for_call(self, *given: Any) -> Options:
        """``options.for_call`` of what a call sets (method, mode, labels, layout, top_logprobs, max_concurrency),
        kept per set of values that are each None, text or an int by exact type (so ``True`` and ``1`` never
        share one); a value that is refused is refused on every call, as it is never kept."""
        base = self.options
        kept = self._call_options
        if kept[0] is not base:  # the client's options replaced: what was kept was theirs
            kept = self._call_options = (base, {})
        exact = all(v is None or type(v) is str or type(v) is int for v in given)
        opts = kept[1].get(given) if exact else None
        if opts is None:
            method, mode, labels, layout, top_logprobs, max_concurrency = given
            opts = base.for_call(method, mode, labels, layout=layout, top_logprobs=top_logprobs,
                                 max_concurrency=max_concurrency)
            if exact and len(kept[1]) < _KEPT_CALL_OPTIONS:
                kept[1][given] = opts
        return opts

    def check(self, questions: Mapping[str, Any], state: Any = None, **options: Any) -> None:
        """Raise what the call would raise before sending anything (no I/O)."""
        self.checked(PREPARE_STATE if state is None else state, questions, **options)

    def plan(self, state: Any, questions: Mapping[str, Any], *, debug: bool | None = None, **options: Any) -> Plan:
        """Everything checked before any request, then one flow per question (or one hosted flow)."""
        opts, preps = self.checked(state, questions, **options)
        timeout = options.get("timeout")
        budget = Budget.of(opts.timeout if timeout is None else timeout)  # the deadline runs from here: the
        planning = PLANNING.set(budget)  # server's tokenizer may be asked below, within it (calls.planning_time_left)
        try:
            preps = self._token_checked(preps, opts)
            opts = self._exact(opts, preps)
            if not opts.hosted:
                opts, concurrency, why = self._resolve_layout(opts, preps, state)
        finally:
            PLANNING.reset(planning)
        budget.check()  # time that ran out while planning: no request is sent
        debug = opts.debug if debug is None else debug
        records = [Record(debug) for _ in preps]
        if opts.hosted:
            flows: list[Flow[Any]] = [hosted_flow(opts, preps, state, records[0])]
            return Plan(preps, flows, records, False, budget, time.perf_counter(), debug)
        flows = [answer(Ask(p, state, opts, self.memory, self.speaks, r)) for p, r in zip(preps, records)]
        scout = self.memory.needs_scout(opts.model, opts.api, self.speaks, len(preps))
        return Plan(preps, flows, records, scout, budget, time.perf_counter(), debug, concurrency, why)

    def preview_plan(self, plan: Plan) -> list[dict[str, Any]]:
        """A planned call's first request per question, and its input tokens where the server can count them; its
        flows closed unsent."""
        return preview_calls(plan.preps, plan.flows, self.tokenize)

    def finish(self, plan: Plan, outcomes: list[Any]) -> SystemOneResponse:
        """The first error in question order, or the response (and the model's surface is known from now on)."""
        records = plan.records
        if self.options.hosted:
            [outcome] = outcomes
            outcomes = [outcome] if isinstance(outcome, BaseException) else list(outcome)
            records = hosted_records(plan.preps, plan.records[0], self.options.api)
        error = drive.first_error(outcomes)
        if error is not None:
            raise error
        self.memory.mark_scouted(self.options.model)
        resp = assemble(self.options.model, plan.preps, outcomes, records, server_limits=self.memory.limits(
            self.options.model), started=plan.started, debug=plan.debug)
        if plan.layout and plan.layout.get("layout") and resp.debug is not None:  # assemble always gives a dict
            resp.debug["layout"] = plan.layout
        resp = resp if self.calibrator is None else calibrated(
            self.calibrator, self.calibration_name, self.own_calibrations, plan.preps, plan.records, resp)
        return resp if self.sets is None else resp.model_copy(update={"answers": attach_sets(resp.answers, self.sets)})

    def _token_checked(self, preps: list[Prepared], opts: Options) -> list[Prepared]:
        """Choice names the server's tokenizer does not tell apart at the first token get answer words
        it does (``labels.token_checked_aliases``), found once per option set; no tokenizer, no change."""
        tokenize = self.tokenize
        if tokenize is None or opts.labels != "names" or opts.hosted or opts.method not in (*TOKEN_READOUT, "auto"):
            return preps
        return [self._with_checked_aliases(p, tokenize) if p.kind == "choice" else p for p in preps]

    def _exact(self, opts: Options, preps: list[Prepared]) -> Options:
        """The answer words' token ids, where this server reads them exactly and a token readout may run."""
        if self.token_table is None or opts.hosted or opts.method not in ("logprobs", "auto"):
            return opts
        words = [w for p in preps for w in answer_words(p, opts.labels)]
        ids = self.token_table.ids(words)
        if not ids:
            return opts
        return opts.evolved(token_ids=ids, token_paths=self.token_table.paths(words),
                            token_texts=self.token_table.texts(words))

    def _with_checked_aliases(self, prep: Prepared, tokenize: Callable[[str], Any]) -> Prepared:
        key = (prep.keys, prep.descriptions)
        if key not in self._checked_aliases:
            try:
                first = partial(_first_token, tokenize)
                self._checked_aliases[key] = token_checked_aliases(prep.keys, prep.descriptions, first)
            except Exception:  # noqa: BLE001 - a tokenizer that fails leaves the names' own aliases
                if _out_of_time():
                    return prep  # the call's deadline, not the tokenizer: asked again next call
                self._checked_aliases[key] = None
        aliases = self._checked_aliases[key]
        return dataclasses.replace(prep, aliases=aliases) if aliases else prep

    def _resolve_layout(self, opts: Options, preps: list[Prepared], state: Any) -> tuple[Options, int, Any]:
        """layout="auto": state_last, or split with the questions in turn when that reads fewer tokens."""
        if opts.layout != "auto":
            return opts, opts.max_concurrency, None
        layout, why = choose_layout(preps, state, self.tokenize)
        concurrency = 1 if layout == "split" else opts.max_concurrency
        return opts.with_layout(layout), concurrency, why

    def _refuse_sets_of_other_options(self, preps: list[Prepared]) -> None:
        """Sets the call would attach to a question but fitted on other options: an InvalidQuestionError before
        any request. Their set would mean nothing, and an answer left without one would not abstain."""
        if self.sets is None:
            return
        for p in preps:
            sets = sets_for(self.sets, p.id)
            if sets is None or sets.applies_to(dict.fromkeys(p.keys, 0.0)):
                continue
            missing = [o for o in sets.options if o not in p.keys]
            extra = [k for k in p.keys if k not in sets.options]
            raise InvalidQuestionError(
                f"the decision sets it gets were fitted on other options (theirs and not the question's: "
                f"{_few(missing)}; the question's and not theirs: {_few(extra)}): refit them on this question's "
                "answers (jev calibrate), or give the client sets per question id, sets={question_id: sets}",
                question_id=p.id, field="sets")

    def _refuse_what_the_surface_cannot_carry(self, opts: Options, examples: Any) -> None:
        if opts.hosted:
            refuse_llm_options(opts, examples)
            return
        surface = self.memory.surface_for(opts.model, opts.method, opts.api, self.speaks)
        if opts.method in TOKEN_READOUT and not SURFACES[surface].logprobs:
            raise UnsupportedMethodError(
                f"method={opts.method!r} reads token logprobs, which {SURFACES[surface].title or surface} never returns; "
                "use method='structured' or method='discrete' (or 'auto')")
        if opts.method == "grammar" and opts.api != "auto" and not SURFACES[opts.api].grammar:
            takes = [name for name, s in SURFACES.items() if s.grammar]
            raise UnsupportedMethodError(
                f"grammar requires a surface that accepts a `grammar` field (llama.cpp and similar servers); "
                f"pass {' or '.join(f'api={name!r}' for name in takes)}")


def _few(keys: list[str], shown: int = 5) -> str:
    """Up to ``shown`` keys, and how many more."""
    if not keys:
        return "none"
    more = f" and {len(keys) - shown} more" if len(keys) > shown else ""
    return ", ".join(repr(k) for k in keys[:shown]) + more


def _resumed(first: Call, flow: Flow[T]) -> Flow[T]:
    """``flow`` after its first request was taken: that request, then the flow itself, sent what this is sent."""
    call = first
    try:
        while True:
            try:
                reply: Reply = yield call
            except GeneratorExit:
                raise
            except BaseException as exc:  # noqa: BLE001 - a provider's fault thrown in: the flow's to handle
                call = flow.throw(exc)
            else:
                call = flow.send(reply)
    except StopIteration as stop:
        return stop.value
    finally:
        flow.close()


def _ended(outcome: BaseException) -> Flow[Any]:
    """A flow that ended before its first request, as it ended (its error, or its value)."""
    if isinstance(outcome, StopIteration):
        return outcome.value
    raise outcome
    yield  # noqa: B901 - never reached: it makes this a generator


def _out_of_time() -> bool:
    budget = PLANNING.get()
    left = None if budget is None else budget.left()
    return left is not None and left <= 0


def _first_token(tokenize: Callable[[str], Any], word: str) -> Any:
    ids = list(tokenize(word))
    return ids[0] if ids else None


__all__ = ["CallOptions", "Plan", "Planner", "resolved"]
