"""Engine: runs questions through the pipeline, concurrently, and assembles the response.

Each question is a *flow*: a generator that yields :class:`Call` objects and receives replies.
The flow holds every decision (method, retries, fallbacks, escalation) and never does I/O, so the
sync client (threads) and the async client (tasks) drive the very same code.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import math
import threading
import time
from collections.abc import Generator, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from .answers import (
    Answer,
    ChoiceAnswer,
    NoulAnswer,
    ScoreAnswer,
    SystemOneResponse,
    Usage,
    answer_confidence,
    build_answer,
)
from .errors import (
    ClientCapabilityError,
    DecisionTimeoutError,
    FieldRefusedError,
    IncompleteAnswerError,
    InvalidQuestionError,
    JevError,
    LabelReadoutError,
    MalformedAnswerError,
    ProviderError,
    UnsupportedMethodError,
)
from .faults import READOUT_FIELDS, cannot_carry, logprobs_value_complaint, refused_field, route_missing, sent_fields
from .json_readout import parse_object, read_discrete, read_ratings, read_structured, strip_think
from .labels import AmbiguousNamesError, Fold, digit_fold, name_fold, names_collide, yes_no_fold
from .methods import JSON_READOUT, METHODS, TOKEN_READOUT, MethodConfig, answer_format, example_json, request_fields
from .prompt import LABEL, LAYOUTS, AnswerFormat, render, symbols_of
from .questions import MAX_SINGLE_TOKEN_LABELS, Choice, Example, Noul, Prepared, Score, check_state, prepare_question
from .readout import divide_prior, read_labels
from .redact import redact
from .surfaces import (
    CHAT,
    MESSAGES,
    PER_QUESTION,
    RESPONSES,
    Parsed,
    build_call,
    check_complete,
    check_refusal,
    parse_reply,
    strip_fields,
)
from .transport import NO_BUDGET, SURFACE_PATHS, Budget, Call, Reply, RetryPolicy, asend, send

log = logging.getLogger("jev_shared")

MODES = ("system1", "system2", "auto")
LABEL_STYLES = ("letters", "names")
APIS = ("auto", CHAT, RESPONSES, MESSAGES, "systemone", "decisions")
HOSTED = ("systemone", "decisions")
#: debias=True asks each prompt about these states once (Zhao et al. 2021, "Calibrate Before Use").
CONTENT_FREE = ("N/A", "", "[MASK]")

Flow = Generator[Call, Reply, Any]


@dataclass
class _Record:
    """What one question's flow observed: usage, diagnostics, and (with debug) every attempt."""

    debug: bool
    usage: Usage = field(default_factory=Usage)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    retry_reasons: list[str] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    readout: dict[str, Any] = field(default_factory=dict)
    escalation: dict[str, Any] | None = None
    passed: str = "system1"
    labels_used: str | None = None
    labels_note: str | None = None
    surfaces: list[str] = field(default_factory=list)
    prior: dict[str, float] | None = None


@dataclass(frozen=True)
class _Opts:
    """Per-call choices: the System 1 method, the mode, and the label style."""

    method: str
    mode: str
    labels: str


def _named(prep: Prepared) -> tuple[AnswerFormat, Fold]:
    """Answer with the option's own name: keys for choice, digits for score, yes/no for noul."""
    if prep.kind == "choice":
        return AnswerFormat(symbols=prep.keys), name_fold(prep.keys)
    if prep.kind == "score":
        return AnswerFormat(symbols=prep.keys), digit_fold(len(prep.keys))
    return AnswerFormat(symbols=("yes", "no")), yes_no_fold


class _Memory:
    """What the client learned about the provider: method=auto verdicts and refused fields."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.no_logprobs: set[tuple[str, str]] = set()  # (model, surface): method=auto answers with structured
        self.strikes: dict[tuple[str, str], int] = {}
        self.refused: dict[tuple[str, str], set[str]] = {}  # (model, surface) -> request fields the server refuses
        self.missing_routes: set[str] = set()  # surfaces that answered 404 under api="auto"
        self.no_distribution: set[tuple[str, str]] = set()  # (model, surface) whose readout carries no distribution
        self.priors: dict[tuple[str, ...], list[float]] = {}  # debias: the content-free answer of each prompt
        self.scouted: set[str] = set()  # models that answered a call: api="auto" knows their surface

    def strike(self, key: tuple[str, str]) -> None:
        with self.lock:
            self.strikes[key] = self.strikes.get(key, 0) + 1
            if self.strikes[key] >= 2:
                self.no_logprobs.add(key)

    def clear(self, key: tuple[str, str]) -> None:
        with self.lock:
            self.strikes.pop(key, None)

    def refuse(self, key: tuple[str, str], name: str) -> None:
        with self.lock:
            self.refused.setdefault(key, set()).add(name)

    def refused_on(self, key: tuple[str, str]) -> set[str]:
        with self.lock:
            return set(self.refused.get(key, ()))

    def limits(self, model: str) -> list[str]:
        with self.lock:
            return sorted({name for (m, _), names in self.refused.items() if m == model for name in names})


def _has_path(obj: Any, *parts: str) -> bool:
    for p in parts:
        obj = getattr(obj, p, None)
        if obj is None:
            return False
    return callable(obj)


def _plain_client(client: Any) -> Any:
    """Switch the openai SDK's own retries off, so they do not multiply with ours."""
    with_options = getattr(client, "with_options", None)
    if callable(with_options):
        try:
            return with_options(max_retries=0)
        except TypeError:
            return client
    return client


class _Base:
    def __init__(
        self,
        client: Any,
        *,
        model: str,
        method: str = "auto",
        mode: str = "system1",
        auto_threshold: float = 0.7,
        api: str = "auto",
        confidence: str = "peak",
        top_logprobs: int = 20,
        max_concurrency: int = 8,
        n_retry_malformed: int = 1,
        thinking: bool | None = None,
        extra_body: dict[str, Any] | None = None,
        layout: str = "state_last",
        labels: str = "names",
        missing: str = "zero",
        examples: list[Example] | Mapping[str, list[Example]] | None = None,
        strict_labels: bool = False,
        debias: bool = False,
        normalize_probabilities: bool = True,
        structured_outputs: bool = True,
        max_retries: int = 3,
        timeout: float | None = None,
        debug: bool = False,
    ) -> None:
        _check_option("method", method, METHODS)
        _check_option("mode", mode, MODES)
        _check_option("api", api, APIS)
        _check_option("confidence", confidence, ("peak", "entropy"))
        _check_option("layout", layout, LAYOUTS)
        _check_option("missing", missing, ("zero", "floor"))
        _check_option("labels", labels, LABEL_STYLES)
        if not isinstance(debias, bool):
            raise ValueError(f"debias: must be True or False, got {debias!r}")
        if not isinstance(model, str) or not model:
            raise ValueError("model: a non-empty model name is required")
        if not 0.0 <= auto_threshold <= 1.0:
            raise ValueError(f"auto_threshold: must lie in [0, 1], got {auto_threshold}")
        if not isinstance(top_logprobs, int) or top_logprobs < 0:
            raise ValueError(f"top_logprobs: must be an integer >= 0, got {top_logprobs!r}")
        if not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ValueError(f"max_concurrency: must be an integer >= 1, got {max_concurrency!r}")
        if not isinstance(n_retry_malformed, int) or n_retry_malformed < 0:
            raise ValueError(f"n_retry_malformed: must be an integer >= 0, got {n_retry_malformed!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries: must be an integer >= 0, got {max_retries!r}")
        _check_timeout(timeout, ValueError)
        if client is None and api == "systemone":
            from .hosted import systemone_client

            client = systemone_client()
        self._speaks = [s for s in PER_QUESTION if _has_path(client, *SURFACE_PATHS[s])]
        if api == "auto" and not self._speaks:
            raise ClientCapabilityError(
                f"{type(client).__name__} has none of chat.completions.create, responses.create or messages.create; "
                "pass an OpenAI-compatible client (or api='systemone' / 'decisions')"
            )
        if api != "auto" and not _has_path(client, *SURFACE_PATHS[api]):
            raise ClientCapabilityError(
                f"api={api!r} needs {type(client).__name__}.{'.'.join(SURFACE_PATHS[api])}, which it does not have; "
                f"pass the surface it speaks explicitly: one of {self._speaks or ['systemone']}"
            )
        self.client = _plain_client(client)
        self.model = model
        self.method = method
        self.mode = mode
        self.auto_threshold = auto_threshold
        self.api = api
        self.confidence = confidence
        self.top_logprobs = top_logprobs
        self.max_concurrency = max_concurrency
        self.n_retry_malformed = n_retry_malformed
        self.thinking = thinking
        self.extra_body = dict(extra_body or {})
        self.layout = layout
        self.labels = labels
        self.missing = missing
        self.examples = examples
        self.strict_labels = strict_labels
        self.debias = debias
        self.normalize_probabilities = normalize_probabilities
        self.structured_outputs = structured_outputs
        self.retry_policy = RetryPolicy(max_retries=max_retries)
        self.timeout = timeout
        self.debug = debug
        self._memory = _Memory()

    # -- preparing a call ------------------------------------------------------------------------

    def _prepare(self, state: Any, questions: Mapping[str, Any], method: str | None, mode: str | None,
                 examples: Any, labels: str | None = None, timeout: float | None = None) -> tuple[list[Prepared], _Opts]:
        opts = _Opts(method or self.method, mode or self.mode, labels or self.labels)
        method = opts.method
        _check_option("method", method, METHODS)
        _check_option("mode", opts.mode, MODES, InvalidQuestionError)
        _check_option("labels", opts.labels, LABEL_STYLES, InvalidQuestionError)
        _check_timeout(timeout, InvalidQuestionError)
        check_state(state)
        if isinstance(questions, Mapping):
            for qid, q in questions.items():
                if not isinstance(qid, str):  # str() would merge {1: q, "1": q} into one answer
                    raise InvalidQuestionError(f"question ids must be strings, got {type(qid).__name__} {qid!r}",
                                               field="questions")
                if not isinstance(q, (Choice, Score, Noul, Mapping)):
                    raise InvalidQuestionError(f"expected a question, got {type(q).__name__}", question_id=str(qid))
        if not isinstance(questions, Mapping) or not questions:
            raise InvalidQuestionError("questions must be a non-empty mapping of id -> question", field="questions")
        preps = [prepare_question(str(qid), q, method, self._shared_examples(str(qid), examples))
                 for qid, q in questions.items()]
        self._check_surface(opts, examples)
        return preps, opts

    def _check_surface(self, opts: _Opts, examples: Any) -> None:
        """Refuse, before any request, what the chosen surface cannot carry."""
        if self.api in HOSTED:
            from .hosted import refuse_llm_options

            refuse_llm_options(self, opts, examples)
            return
        if opts.method in TOKEN_READOUT and self._pick_surface(opts.method) == MESSAGES:
            raise UnsupportedMethodError(
                f"method={opts.method!r} reads token logprobs, which the Messages API never returns; "
                "use method='structured' or method='discrete' (or 'auto')")
        if opts.method == "grammar" and self.api == RESPONSES:
            raise UnsupportedMethodError(
                "grammar requires a Chat Completions surface that accepts a `grammar` field (llama.cpp and similar "
                "servers); pass api='chat_completions'")

    def _pick_surface(self, method: str) -> str:
        """api='auto': Responses, then Chat Completions, then Messages, skipping what was learned missing."""
        if self.api != "auto":
            return self.api
        if method == "grammar" and CHAT in self._speaks:
            return CHAT
        for surface in self._speaks:
            if surface in self._memory.missing_routes:
                continue
            # a Responses route that cannot carry logprobs is a compatibility layer (llama.cpp, ollama,
            # LM Studio) that also ignores text.format: once seen, the model's whole traffic moves
            if (self.model, surface) in self._memory.no_distribution:
                continue
            return surface
        return self._speaks[0]  # the verdict only skips a route when there is another to move to

    def _needs_scout(self, n_questions: int) -> bool:
        """api='auto', a model not seen yet: one question finds the surface before the others follow.

        Otherwise every question of the first call would try the Responses route at once, and on a
        server that cannot carry a distribution there (llama.cpp, ollama) each would fail and move.
        """
        return (self.api == "auto" and n_questions > 1 and len(self._speaks) > 1
                and self.model not in self._memory.scouted)

    def _shared_examples(self, qid: str, call_examples: Any) -> tuple[Example, ...]:
        """Client-level then call-level examples: a list for every question, or a mapping by id."""
        extra: list[Example] = []
        for source in (self.examples, call_examples):
            if source is None:
                continue
            items = source.get(qid, []) if isinstance(source, Mapping) else source
            extra += [e if isinstance(e, Example) else Example.model_validate(e) for e in items]
        return tuple(extra)

    # -- one question's flow ---------------------------------------------------------------------

    def _flow(self, prep: Prepared, state: Any, opts: _Opts, rec: _Record) -> Flow:
        mode = opts.mode
        if mode == "system2":
            rec.passed = "system2"
            probs = yield from self._json_pass(prep, state, "ratings", rec)
            return build_answer(prep, probs, self.confidence)
        probs = yield from self._system1(prep, state, opts, rec)
        answer = build_answer(prep, probs, self.confidence)
        if mode == "auto":
            conf = answer_confidence(answer)
            escalate = conf < self.auto_threshold
            rec.escalation = {
                "confidence": conf,
                "threshold": self.auto_threshold,
                "escalated": escalate,
                "why": f"confidence {conf:.3f} {'<' if escalate else '>='} threshold {self.auto_threshold}",
            }
            if escalate:
                rec.passed = "system2"
                probs = yield from self._json_pass(prep, state, "ratings", rec)
                return build_answer(prep, probs, self.confidence)
        return answer

    def _system1(self, prep: Prepared, state: Any, opts: _Opts, rec: _Record) -> Flow:
        method = opts.method
        if method != "auto":
            if method in TOKEN_READOUT:
                return (yield from self._token_pass(prep, state, method, opts.labels, rec))
            return (yield from self._json_pass(prep, state, method, rec))
        surface = self._pick_surface("logprobs")
        key = (self.model, surface)
        if len(prep.keys) > MAX_SINGLE_TOKEN_LABELS or surface == MESSAGES or key in self._memory.no_logprobs:
            return (yield from self._json_pass(prep, state, "structured", rec))
        try:
            probs = yield from self._token_pass(prep, state, "logprobs", opts.labels, rec)
        except FieldRefusedError:
            with self._memory.lock:  # a refused field is remembered at once
                self._memory.no_logprobs.add((self.model, rec.surfaces[-1]))
            rec.retry_reasons.append("the provider refuses logprobs; answered with structured")
        except LabelReadoutError as exc:
            if not exc.provider_cannot:
                raise
            self._memory.strike((self.model, rec.surfaces[-1]))  # weak evidence: remembered the second time
            rec.retry_reasons.append(f"{exc}; answered with structured")
        except ProviderError as exc:
            # only a value complaint about top_logprobs falls back (for this question, uncached); an outage
            # (5xx, connection) that outlived the retries says nothing about logprobs: it is raised as it is
            if not logprobs_value_complaint(exc):
                raise
            rec.retry_reasons.append(f"{exc}; answered with structured")
        else:
            self._memory.clear((self.model, rec.surfaces[-1]))  # a readable distribution proves it can
            return probs
        return (yield from self._json_pass(prep, state, "structured", rec))

    def _cfg(self) -> MethodConfig:
        return MethodConfig(self.top_logprobs, self.thinking, self.structured_outputs)

    def _token_pass(self, prep: Prepared, state: Any, method: str, labels: str, rec: _Record) -> Flow:
        """A label readout; under api='auto' a surface that carries no distribution moves to Chat Completions."""
        surface = self._pick_surface(method)
        try:
            return (yield from self._label_styles(prep, state, method, labels, surface, rec))
        except (LabelReadoutError, ProviderError) as exc:
            if not (self.api == "auto" and surface == RESPONSES and CHAT in self._speaks and cannot_carry(exc)):
                raise
            with self._memory.lock:
                self._memory.no_distribution.add((self.model, RESPONSES))
            rec.retry_reasons.append(f"{surface} carries no distribution here ({exc}); re-asked on {CHAT}")
            return (yield from self._label_styles(prep, state, method, labels, CHAT, rec))

    def _label_styles(self, prep: Prepared, state: Any, method: str, labels: str, surface: str, rec: _Record) -> Flow:
        rec.methods.append(method)
        fmt, fold = LABEL, None
        if labels == "names":
            if prep.kind == "choice" and names_collide(prep.keys):
                rec.labels_note = "option names may share a first token; read with letters"
            else:
                fmt, fold = _named(prep)
        # letters standing in for names are a fallback: a label outside the window is floored, never read
        # as 0, so a stray letter cannot claim a certainty the window does not support
        fallback = labels == "names"
        try:
            return (yield from self._read_tokens(prep, state, method, fmt, fold, surface, rec, fallback))
        except AmbiguousNamesError as exc:
            rec.labels_note = f"{exc}; re-asked with letters"
            return (yield from self._read_tokens(prep, state, method, LABEL, None, surface, rec, True))

    def _read_tokens(self, prep: Prepared, state: Any, method: str, fmt: AnswerFormat, fold: Fold | None,
                     surface: str, rec: _Record, floor: bool = False) -> Flow:
        symbols = symbols_of(prep, fmt)
        rec.labels_used = "letters" if fmt.symbols is None else "names"
        messages = render(prep, state, layout=self.layout, fmt=fmt)  # type: ignore[arg-type]
        last = self.n_retry_malformed
        for attempt in range(last + 1):
            fields, extra = request_fields(method, prep, self._cfg(), symbols)
            parsed = yield from self._call(surface, messages, fields, extra, rec)
            try:
                if not (parsed.content or "").strip() and parsed.reasoning and not _has_tokens(parsed.logprobs):
                    raise LabelReadoutError(
                        "the server sent reasoning but no answer (a reasoning-only reply); turn thinking off"
                    )
                # a missing *name* may just be tokenised differently, and letters standing in for names are a
                # fallback: both are floored, never read as 0
                missing = "floor" if floor else self.missing
                ro = read_labels(parsed.logprobs, symbols, content=parsed.content, missing=missing,  # type: ignore[arg-type]
                                 method=method, fold=fold)
                if ro.no_signal and self.strict_labels:
                    raise LabelReadoutError(
                        f"first token {ro.sampled!r} is not one of the labels {list(symbols)}, nor is any "
                        "token in the window"
                    )
            except LabelReadoutError as exc:
                if exc.provider_cannot or attempt == last or isinstance(exc, AmbiguousNamesError):
                    raise
                rec.retry_reasons.append(str(exc))
                messages = messages + [
                    {"role": "assistant", "content": parsed.content or ""},
                    {"role": "user", "content": f"Your previous reply was invalid: {exc}. Reply with exactly one "
                     f"of these labels and nothing else: {', '.join(symbols)}."},
                ]
                continue
            rec.readout = ro.debug()
            self._note(rec, "readout", ro.debug())
            if not self.debias:
                return ro.probs
            prior = yield from self._prior(prep, method, fmt, fold, surface, rec)
            rec.prior = dict(zip(symbols, prior))
            rec.readout["prior"] = rec.prior
            return divide_prior(ro.probs, prior)
        raise AssertionError("unreachable")

    def _prior(self, prep: Prepared, method: str, fmt: AnswerFormat, fold: Fold | None, surface: str,
               rec: _Record) -> Flow:
        """debias=True: the answer to content-free states, asked once per prompt and model, then remembered."""
        symbols = symbols_of(prep, fmt)
        first = render(prep, CONTENT_FREE[0], layout=self.layout, fmt=fmt)  # type: ignore[arg-type]
        key = (self.model, surface, method, json.dumps(first, sort_keys=True))
        if key in self._memory.priors:
            return self._memory.priors[key]
        rows = []
        for state in CONTENT_FREE:
            messages = render(prep, state, layout=self.layout, fmt=fmt)  # type: ignore[arg-type]
            fields, extra = request_fields(method, prep, self._cfg(), symbols)
            parsed = yield from self._call(surface, messages, fields, extra, rec)
            rows.append(read_labels(parsed.logprobs, symbols, content=parsed.content, missing="floor",
                                    method=method, fold=fold).probs)
        prior = [sum(col) / len(rows) for col in zip(*rows)]
        with self._memory.lock:
            self._memory.priors[key] = prior
        return prior

    def _json_pass(self, prep: Prepared, state: Any, method: str, rec: _Record) -> Flow:
        rec.methods.append(method)
        surface = self._pick_surface(method)
        fmt = answer_format(method, prep)
        messages = render(prep, state, layout=self.layout, fmt=fmt, example_json=example_json(method, prep))  # type: ignore[arg-type]
        last = self.n_retry_malformed
        for attempt in range(last + 1):
            fields, extra = request_fields(method, prep, self._cfg())
            parsed = yield from self._call(surface, messages, fields, extra, rec)
            content = parsed.content or ""
            try:
                check_complete(parsed, rec.surfaces[-1])
                if not content.strip():
                    if parsed.reasoning:
                        raise MalformedAnswerError(
                            "the server separated reasoning from the answer and sent no answer (a reasoning-only "
                            "reply); give the model more output budget or turn thinking off"
                        )
                    raise MalformedAnswerError("the reply is empty")
                obj = parse_object(strip_think(content))
                if method == "structured":
                    ro = read_structured(prep.keys, prep.kind, obj, self.normalize_probabilities)
                elif method == "discrete":
                    ro = read_discrete(prep.keys, prep.labels, prep.kind, obj)
                else:
                    ro = read_ratings(prep.keys, obj)
            except (MalformedAnswerError, IncompleteAnswerError) as exc:
                if attempt == last or getattr(exc, "field", None) == "state":
                    raise
                rec.retry_reasons.append(str(exc))
                messages = messages + [
                    {"role": "assistant", "content": content},
                    {"role": "user", "content": f"Your previous reply was invalid: {exc}. Return only a JSON object "
                     "matching the schema."},
                ]
                continue
            rec.readout = ro.debug()
            if parsed.reasoning:
                rec.readout["reasoning"] = parsed.reasoning
            self._note(rec, "readout", rec.readout)
            return ro.probs
        raise AssertionError("unreachable")

    def _call(self, surface: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
              rec: _Record) -> Generator[Call, Reply, Parsed]:
        """Send one request and read the reply; refusals and filters raise here.

        A refused optional field is dropped and the call re-asked (remembered for the client); under
        api='auto' a 404 from the Responses route that does not name the model moves to Chat Completions.
        """
        while True:
            call = build_call(surface, self.model, messages, fields, extra, self.extra_body)
            strip_fields(call, self._memory.refused_on((self.model, surface)))
            self._note(rec, "request", call.kwargs)
            rec.usage.n_calls += 1
            rec.surfaces.append(surface)
            try:
                reply = yield call
            except ProviderError as exc:
                rec.usage.n_retries += exc.n_retries
                if self.api == "auto" and surface != CHAT and CHAT in self._speaks and route_missing(exc, self.model):
                    with self._memory.lock:
                        self._memory.missing_routes.add(surface)
                    rec.retry_reasons.append(f"{surface} answered 404; re-asked on {CHAT}")
                    surface = CHAT
                    continue
                name = refused_field(exc, sent_fields(call.kwargs), surface)
                if name is None:
                    raise
                if name in READOUT_FIELDS:
                    raise FieldRefusedError(str(exc), field=name, status_code=exc.status_code,
                                            provider_message=exc.provider_message, body=exc.body) from exc
                schema = (call.kwargs.get("response_format") or {}).get("type") == "json_schema"
                self._memory.refuse((self.model, surface),
                                    "response_format:json_schema" if name == "response_format" and schema else name)
                rec.retry_reasons.append(f"the server refuses {name!r}; re-asked without it")
                continue
            rec.usage.n_retries += reply.n_retries
            parsed = parse_reply(surface, reply.body)
            rec.usage.add_tokens(parsed.input_tokens, parsed.output_tokens)
            self._note(rec, "response", reply.body)
            check_refusal(parsed)
            return parsed

    def _note(self, rec: _Record, kind: str, payload: Any) -> None:
        if rec.debug:
            entry = {"kind": kind, "data": redact(payload)}
            rec.attempts.append(entry)
            log.debug("jev %s: %s", kind, entry["data"])

    def _hosted_flow(self, preps: list[Prepared], state: Any, rec: _Record) -> Flow:
        """All questions in one request to a service; per-question refusals come back as exceptions."""
        from . import hosted

        call = hosted.build(self.api, self.model, state, preps)
        self._note(rec, "request", call.kwargs)
        rec.usage.n_calls += 1
        try:
            reply = yield call
        except ProviderError as exc:
            rec.usage.n_retries += exc.n_retries
            raise hosted.map_error(exc, preps) from exc
        rec.usage.n_retries += reply.n_retries
        self._note(rec, "response", reply.body)
        answers, tokens = hosted.parse(self.api, reply.body, preps)
        rec.usage.add_tokens(*tokens)
        return answers

    def _hosted_records(self, preps: list[Prepared], rec: _Record) -> list[_Record]:
        """One record per question for the response's debug; the call's usage sits on the first."""
        records = [rec] + [_Record(rec.debug) for _ in preps[1:]]
        for r in records:
            r.methods.append(self.api)
            r.surfaces.append(self.api)
        return records

    # -- assembling the response -----------------------------------------------------------------

    def _response(self, preps: list[Prepared], answers: list[Answer], records: list[_Record], started: float,
                  debug: bool) -> SystemOneResponse:
        with self._memory.lock:
            self._memory.scouted.add(self.model)  # an answered call settled the surface: no more scouts
        usage = Usage()
        for rec in records:
            usage.merge(rec.usage)
        usage.latency_ms = (time.perf_counter() - started) * 1000.0
        apis = {p.id: r.surfaces[-1] for p, r in zip(preps, records) if r.surfaces}
        dbg: dict[str, Any] = {"api": next(iter(set(apis.values()))) if len(set(apis.values())) == 1 else "mixed",
                               "apis": apis, "methods": {}, "passes": {}, "labels_missing": {}, "no_signal": [],
                               "truncated": [], "retry_reasons": {}, "server_limits": self._memory.limits(self.model)}
        for p, r in zip(preps, records):
            dbg["methods"][p.id] = r.methods[-1]
            dbg["passes"][p.id] = r.passed
            for name, value in (("labels_missing", r.readout.get("labels_missing")), ("retry_reasons", r.retry_reasons),
                                ("labels", r.labels_used), ("labels_fallback", r.labels_note),
                                ("escalations", r.escalation), ("priors", r.prior)):
                if value:
                    dbg.setdefault(name, {})[p.id] = value
            for flag in ("no_signal", "truncated"):
                if r.readout.get(flag):
                    dbg[flag].append(p.id)
        if debug:
            dbg["questions"] = {p.id: {"readout": r.readout, "attempts": r.attempts} for p, r in zip(preps, records)}
        return SystemOneResponse(model=self.model, answers=dict(zip((p.id for p in preps), answers)), usage=usage,
                                 debug=dbg)


def _has_tokens(logprobs: Any) -> bool:
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    return bool(content)


def _check_option(name: str, value: Any, allowed: tuple[str, ...], error: type[Exception] = ValueError) -> None:
    """Constructor options raise ValueError; per-call ones a JevError (InvalidQuestionError naming the field)."""
    if value not in allowed:
        message = f"must be one of {list(allowed)}, got {value!r}"
        if name == "method":
            raise UnsupportedMethodError(f"{name}: {message}")
        raise error(message, field=name) if error is InvalidQuestionError else error(f"{name}: {message}")


def _check_timeout(value: Any, error: type[Exception]) -> None:
    """A total timeout is None or a finite number of seconds above 0 (inf would overflow the thread wait)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        message = f"must be None or a finite number of seconds > 0, got {value!r}"
        raise error(message, field="timeout") if error is InvalidQuestionError else error(f"timeout: {message}")


def _first_error(errors: list[BaseException | None]) -> BaseException | None:
    return next((e for e in errors if e is not None), None)


class SystemOneClient(_Base):
    """Typed decisions from any OpenAI-compatible chat client (sync).

    >>> client = SystemOneClient(openai.OpenAI(), model="gpt-4o-mini")
    >>> client.system_one(state="...", questions={"team": Choice(instructions="...", criteria={...})})
    """

    def _drive(self, flow: Flow, budget: Budget = NO_BUDGET) -> Any:
        try:
            call = next(flow)
            while True:
                try:
                    reply = send(self.client, call, self.retry_policy, budget)
                except ProviderError as exc:
                    call = flow.throw(exc)
                else:
                    call = flow.send(reply)
        except StopIteration as stop:
            return stop.value

    def system_one(self, state: Any, questions: Mapping[str, Any], *, method: str | None = None,
                   mode: str | None = None, labels: str | None = None, examples: Any = None,
                   timeout: float | None = None, debug: bool | None = None) -> SystemOneResponse:
        """Answer every question about ``state``; answers keep question order."""
        preps, opts = self._prepare(state, questions, method, mode, examples, labels, timeout)
        debug = self.debug if debug is None else debug
        timeout = self.timeout if timeout is None else timeout
        started = time.perf_counter()
        records = [_Record(debug) for _ in preps]
        budget = Budget.of(timeout)

        def run(i: int) -> Answer:
            return self._drive(self._flow(preps[i], state, opts, records[i]), budget)

        results: list[Any] = [None] * len(preps)
        errors: list[BaseException | None] = [None] * len(preps)
        if self.api in HOSTED:
            results = self._drive(self._hosted_flow(preps, state, records[0]), budget)
            errors = [r if isinstance(r, Exception) else None for r in results]
            records = self._hosted_records(preps, records[0])
        elif len(preps) == 1 and timeout is None:
            results[0] = run(0)
        else:
            pool = ThreadPoolExecutor(max_workers=min(self.max_concurrency, len(preps)), thread_name_prefix="jev")
            try:
                # each task runs in a copy of the caller's context, so tracing context vars reach it
                futures = []
                if self._needs_scout(len(preps)):
                    futures.append(pool.submit(contextvars.copy_context().run, run, 0))
                    wait(futures, timeout=timeout)
                    if not futures[0].done():
                        budget.cancel()
                        raise DecisionTimeoutError(f"the call's total timeout of {timeout}s ran out")
                    if futures[0].exception():  # the first question's error is the one reported anyway
                        raise futures[0].exception()  # type: ignore[misc]
                left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - started))
                futures += [pool.submit(contextvars.copy_context().run, run, i) for i in range(len(futures), len(preps))]
                done, pending = wait(futures, timeout=left, return_when=FIRST_EXCEPTION)
                if not pending or any(f.exception() for f in done):
                    wait(futures, timeout=left)  # let the rest finish, so the first error is in question order
                if any(not f.done() for f in futures):
                    budget.cancel()  # no question may send another request for a call that has failed
                    raise DecisionTimeoutError(f"the call's total timeout of {timeout}s ran out")
                for i, f in enumerate(futures):
                    errors[i] = f.exception()
                    results[i] = None if errors[i] else f.result()
            finally:
                pool.shutdown(wait=False, cancel_futures=True)
        err = _first_error(errors)
        if err is not None:
            raise err
        return self._response(preps, results, records, started, debug)

    def choice(self, state: Any, instructions: str, criteria: Mapping[str, str], **kw: Any) -> ChoiceAnswer:
        return self.system_one(state, {"choice": Choice(instructions=instructions, criteria=dict(criteria))}, **kw).answers["choice"]  # type: ignore[return-value]

    def score(self, state: Any, instructions: str, criteria: list[str] | Mapping[str, str], **kw: Any) -> ScoreAnswer:
        return self.system_one(state, {"score": Score(instructions=instructions, criteria=criteria)}, **kw).answers["score"]  # type: ignore[return-value,arg-type]

    def noul(self, state: Any, instructions: str, criteria: Mapping[str, str] | None = None, **kw: Any) -> NoulAnswer:
        return self.system_one(state, {"noul": Noul(instructions=instructions, criteria=criteria)}, **kw).answers["noul"]  # type: ignore[return-value,arg-type]


class AsyncSystemOneClient(_Base):
    """The async twin of :class:`SystemOneClient`, over an async client (``openai.AsyncOpenAI``)."""

    async def _drive(self, flow: Flow, sem: asyncio.Semaphore, budget: Budget = NO_BUDGET) -> Any:
        try:
            call = next(flow)
            while True:
                try:
                    async with sem:
                        reply = await asend(self.client, call, self.retry_policy, budget)
                except ProviderError as exc:
                    call = flow.throw(exc)
                else:
                    call = flow.send(reply)
        except StopIteration as stop:
            return stop.value

    async def _answer_all(self, preps: list[Prepared], state: Any, opts: _Opts, records: list[_Record],
                          sem: asyncio.Semaphore, budget: Budget) -> list[Any]:
        """Every question's flow as a task; a scout question first when the surface is still unknown."""
        def drive(i: int) -> Any:
            return self._drive(self._flow(preps[i], state, opts, records[i]), sem, budget)

        head: list[Any] = []
        if self._needs_scout(len(preps)):
            head = await asyncio.gather(drive(0), return_exceptions=True)
            if isinstance(head[0], BaseException):  # the first question's error is the one reported anyway
                return head + [None] * (len(preps) - 1)
        rest = await asyncio.gather(*(drive(i) for i in range(len(head), len(preps))), return_exceptions=True)
        return head + list(rest)

    async def system_one(self, state: Any, questions: Mapping[str, Any], *, method: str | None = None,
                         mode: str | None = None, labels: str | None = None, examples: Any = None,
                         timeout: float | None = None, debug: bool | None = None) -> SystemOneResponse:
        """Answer every question about ``state``; answers keep question order."""
        preps, opts = self._prepare(state, questions, method, mode, examples, labels, timeout)
        debug = self.debug if debug is None else debug
        timeout = self.timeout if timeout is None else timeout
        started = time.perf_counter()
        records = [_Record(debug) for _ in preps]
        sem = asyncio.Semaphore(self.max_concurrency)
        budget = Budget.of(timeout)
        if self.api in HOSTED:
            gathered = self._drive(self._hosted_flow(preps, state, records[0]), sem, budget)
            records = self._hosted_records(preps, records[0])
        else:
            gathered = self._answer_all(preps, state, opts, records, sem, budget)
        try:
            results = await asyncio.wait_for(gathered, timeout) if timeout is not None else await gathered
        except TimeoutError:
            budget.cancel()
            raise DecisionTimeoutError(f"the call's total timeout of {timeout}s ran out") from None
        err = _first_error([r if isinstance(r, BaseException) else None for r in results])
        if err is not None:
            raise err
        return self._response(preps, list(results), records, started, debug)

    async def choice(self, state: Any, instructions: str, criteria: Mapping[str, str], **kw: Any) -> ChoiceAnswer:
        resp = await self.system_one(state, {"choice": Choice(instructions=instructions, criteria=dict(criteria))}, **kw)
        return resp.answers["choice"]  # type: ignore[return-value]

    async def score(self, state: Any, instructions: str, criteria: list[str] | Mapping[str, str], **kw: Any) -> ScoreAnswer:
        resp = await self.system_one(state, {"score": Score(instructions=instructions, criteria=criteria)}, **kw)  # type: ignore[arg-type]
        return resp.answers["score"]  # type: ignore[return-value]

    async def noul(self, state: Any, instructions: str, criteria: Mapping[str, str] | None = None, **kw: Any) -> NoulAnswer:
        resp = await self.system_one(state, {"noul": Noul(instructions=instructions, criteria=criteria)}, **kw)  # type: ignore[arg-type]
        return resp.answers["noul"]  # type: ignore[return-value]


__all__ = ["SystemOneClient", "AsyncSystemOneClient", "FieldRefusedError", "JevError", "JSON_READOUT"]
