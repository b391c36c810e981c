"""Flows: one question's whole decision, as a generator that yields calls and is sent replies.

A flow holds every choice (method, fallbacks, repair turns, escalation) and does no I/O: the
drivers in :mod:`drive` send its calls (httpx's ``auth_flow`` pattern, h11's sans-I/O rule). So the
sync and async clients run the very same code, and a test can drive a flow by hand::

    flow = answer(ask)
    call = next(flow)                  # the first request
    call = flow.send(Reply(body, 0.0)) # its reply; StopIteration carries the Answer

Each function reads one :class:`Ask` and writes only to ``ask.record``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from .answers import Answer, answer_confidence, build_answer
from .calls import Call, Flow, Reply
from .continuation import PREFILL_FIELDS, chain, conditional, window_of
from .errors import FieldRefusedError, IncompleteAnswerError, LabelReadoutError, MalformedAnswerError, ProviderError
from .faults import READOUT_FIELDS, cannot_carry, logprobs_value_complaint, refused_field, route_missing, sent_fields
from .json_readout import parse_object, read_json, strip_think
from .labels import FALLBACK_TRUST, LETTERS_FALLBACK, AmbiguousNamesError, LabelStyle, names_starting, style_for
from .memory import BackendMemory, Memory
from .methods import TOKEN_READOUT, answer_format, example_json, request_fields
from .options import Options
from .prompt import render, symbols_of
from .questions import MAX_SINGLE_TOKEN_LABELS, Prepared, example_key
from .readout import Readout, divide_prior, humble, read_labels, softmax_labels
from .record import Record
from .surfaces import (
    CHAT,
    MESSAGES,
    RESPONSES,
    Parsed,
    build_call,
    check_complete,
    check_refusal,
    parse_reply,
    strip_fields,
)

T = TypeVar("T")
Messages = list[dict[str, Any]]
#: debias=True asks each prompt about these states once (Zhao et al. 2021, "Calibrate Before Use").
CONTENT_FREE = ("N/A", "", "[MASK]")


@dataclass(frozen=True)
class Ask:
    """One question in one call: everything its flow reads. The flow writes only to ``record``."""

    prep: Prepared
    state: Any  # read in two places only: read_tokens and json_pass render it
    options: Options  # this call's (Options.for_call)
    memory: BackendMemory  # a whole Memory is taken as its default backend's (tests drive flows by hand)
    speaks: tuple[str, ...]
    record: Record

    def __post_init__(self) -> None:
        if isinstance(self.memory, Memory):
            object.__setattr__(self, "memory", self.memory.for_backend(""))

    @property
    def model(self) -> str:
        return self.options.model

    def surface(self, method: str) -> str:
        return self.memory.surface_for(self.model, method, self.options.api, self.speaks)


def answer(ask: Ask) -> Flow[Answer]:
    """System 1, System 2, or System 1 escalated once to System 2 below the auto threshold."""
    opts, rec = ask.options, ask.record
    if opts.mode == "system2":
        rec.passed = "system2"
        return build_answer(ask.prep, (yield from json_pass(ask, "ratings")), opts.confidence)
    first = build_answer(ask.prep, (yield from system1(ask)), opts.confidence)
    if opts.mode != "auto":
        return first
    conf = answer_confidence(first)
    escalate = conf < opts.auto_threshold
    rec.escalation = {"confidence": conf, "threshold": opts.auto_threshold, "escalated": escalate,
                      "why": f"confidence {conf:.3f} {'<' if escalate else '>='} threshold {opts.auto_threshold}"}
    if not escalate:
        return first
    rec.passed = "system2"
    return build_answer(ask.prep, (yield from json_pass(ask, "ratings")), opts.confidence)


def system1(ask: Ask) -> Flow[list[float]]:
    """The configured method; under method='auto', logprobs where the provider gives them, else structured."""
    method, rec = ask.options.method, ask.record
    if method != "auto":
        if method in TOKEN_READOUT:
            return (yield from token_pass(ask, method))
        return (yield from json_pass(ask, method))
    key = (ask.model, ask.surface("logprobs"))
    letters_only = ask.options.labels == "letters" and len(ask.prep.keys) > MAX_SINGLE_TOKEN_LABELS
    if letters_only or key[1] == MESSAGES or ask.memory.answers_with_structured(key):
        return (yield from json_pass(ask, "structured"))
    try:
        probs = yield from token_pass(ask, "logprobs")
    except FieldRefusedError:
        ask.memory.mark_no_logprobs((ask.model, rec.surfaces[-1]))  # a refused field is remembered at once
        rec.retry_reasons.append("the provider refuses logprobs; answered with structured")
    except LabelReadoutError as exc:
        if not exc.provider_cannot:
            raise
        ask.memory.strike((ask.model, rec.surfaces[-1]))  # weak evidence: remembered the second time
        rec.retry_reasons.append(f"{exc}; answered with structured")
    except ProviderError as exc:
        # only a value complaint about top_logprobs falls back (for this question, uncached); an outage
        # (5xx, connection) that outlived the retries says nothing about logprobs: it is raised as it is
        if not logprobs_value_complaint(exc):
            raise
        rec.retry_reasons.append(f"{exc}; answered with structured")
    else:
        ask.memory.clear_strikes((ask.model, rec.surfaces[-1]))  # a readable distribution proves it can
        return probs
    return (yield from json_pass(ask, "structured"))


def token_pass(ask: Ask, method: str) -> Flow[list[float]]:
    """A label readout; under api='auto' a surface that carries no distribution moves to Chat Completions."""
    surface = ask.surface(method)
    try:
        return (yield from label_pass(ask, method, surface))
    except (LabelReadoutError, ProviderError) as exc:
        if not (ask.options.api == "auto" and surface == RESPONSES and CHAT in ask.speaks and cannot_carry(exc)):
            raise
        ask.memory.mark_no_distribution((ask.model, RESPONSES))
        ask.record.retry_reasons.append(f"{surface} carries no distribution here ({exc}); re-asked on {CHAT}")
        return (yield from label_pass(ask, method, CHAT))


def label_pass(ask: Ask, method: str, surface: str) -> Flow[list[float]]:
    """Names (or aliases); a shared prefix read on where the surface takes a prefill, letters (at most
    26 options) or structured (more) as the last resort."""
    ask.record.methods.append(method)
    style = style_for(ask.prep, ask.options.labels)
    if style.note:
        ask.record.labels_note = style.note
    try:
        return (yield from read_tokens(ask, method, style, surface))
    except AmbiguousNamesError as exc:
        if len(ask.prep.keys) > MAX_SINGLE_TOKEN_LABELS:
            ask.record.labels_note = f"{exc}; answered with structured"
            return (yield from json_pass(ask, "structured"))
        ask.record.labels_note = f"{exc}; re-asked with letters"
        return (yield from read_tokens(ask, method, LETTERS_FALLBACK, surface))


def read_tokens(ask: Ask, method: str, style: LabelStyle, surface: str) -> Flow[list[float]]:
    """One label token's window → a distribution (divided by the content-free prior under debias)."""
    prep, opts, rec = ask.prep, ask.options, ask.record
    symbols = symbols_of(prep, style.fmt)
    rec.labels_used = "letters" if style.fmt.symbols is None else "names"
    # a missing *name* may just be tokenised differently, and letters standing in for names are a
    # fallback: both are floored, never read as 0
    missing = "floor" if style.floor else opts.missing

    def read(parsed: Parsed) -> Any:
        if not (parsed.content or "").strip() and parsed.reasoning and not _has_tokens(parsed.logprobs):
            raise LabelReadoutError("the server sent reasoning but no answer (a reasoning-only reply); turn thinking off")
        ro = read_labels(parsed.logprobs, symbols, content=parsed.content, missing=missing,  # type: ignore[arg-type]
                         method=method, fold=style.fold)
        if ro.no_signal and opts.strict_labels:
            raise LabelReadoutError(f"first token {ro.sampled!r} is not one of the labels {list(symbols)}, nor is any "
                                    "token in the window")
        return ro

    def repairable(exc: Exception) -> bool:
        return isinstance(exc, LabelReadoutError) and not exc.provider_cannot and not isinstance(exc, AmbiguousNamesError)

    repair = f"Reply with exactly one of these labels and nothing else: {', '.join(symbols)}."
    messages = render(prep, ask.state, layout=opts.layout, fmt=style.fmt)  # type: ignore[arg-type]
    fields, extra = request_fields(method, prep, opts.method_config, symbols)
    try:
        _, ro = yield from ask_until_read(ask, surface, messages, fields, extra, read, repairable, repair)
    except AmbiguousNamesError as exc:
        if not (style.named_choice and surface == CHAT):  # a prefill is a Chat Completions message
            raise
        ro = yield from continue_read(ask, surface, messages, fields, extra, symbols, exc)
    rec.readout = ro.debug()
    rec.note("readout", rec.readout)
    if style.fallback:
        ro.probs = humble(ro.probs, FALLBACK_TRUST)
        rec.readout["fallback_trust"] = FALLBACK_TRUST
    prior = yield from debias_prior(ask, method, style, surface)
    if prior is None:
        return ro.probs
    rec.prior = dict(zip(symbols, prior))
    rec.readout["prior"] = rec.prior
    return divide_prior(ro.probs, prior)


def continue_read(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
                  symbols: tuple[str, ...], exc: AmbiguousNamesError) -> Flow[Readout]:
    """One more one-token call with the shared prefix already answered: P(name) = P(prefix)·P(rest | prefix)."""
    group = names_starting(exc.token, symbols)
    prefill = messages + [{"role": "assistant", "content": exc.token}]
    parsed = yield from call(ask, surface, prefill, fields, {**extra, **PREFILL_FIELDS})
    cond = conditional(exc.token, group, window_of(parsed.logprobs, parsed.content))
    ro = softmax_labels(symbols, chain(exc.logprob, cond, exc.best), exc.returned, "floor", exc.token, "logprobs")
    ro.source = "logprobs+continuation"
    ask.record.note("continuation", {"prefix": exc.token, "group": group, "conditional": cond})
    return ro


def debias_prior(ask: Ask, method: str, style: LabelStyle, surface: str) -> Flow[list[float] | None]:
    """The lean to divide out, or None. Examples that show every option: their own (leave-one-out);
    no examples: the content-free states'; examples that leave options out: content-free under
    ``debias=True`` only (measured to over-correct, docs/decisions.md)."""
    prep, debias = ask.prep, ask.options.debias
    if debias is False:
        return None
    if shows_every_option(prep):
        return (yield from examples_prior(ask, method, style, surface))
    if prep.examples and debias == "auto":
        return None
    return (yield from content_free_prior(ask, method, style, surface))


def shows_every_option(prep: Prepared) -> bool:
    return len(prep.examples) >= 2 and {example_key(prep, ex.answer) for ex in prep.examples} == set(prep.keys)


def content_free_prior(ask: Ask, method: str, style: LabelStyle, surface: str) -> Flow[list[float]]:
    """The answer to content-free states, asked once per prompt and model, then remembered."""
    asks = [(ask.prep, state) for state in CONTENT_FREE]
    return _mean((yield from _remembered_rows(ask, method, style, surface, "content-free", asks)))


def examples_prior(ask: Ask, method: str, style: LabelStyle, surface: str) -> Flow[list[float]]:
    """The examples' own lean: each example's state asked with others as its examples (never itself);
    the mean answer per true option, averaged over the options, is what the model adds to in-domain
    states whatever they say. Asked once per prompt and model, then remembered."""
    prep = ask.prep
    held = held_out(prep)
    rows = yield from _remembered_rows(ask, method, style, surface, "held-out", [(p, ex.state) for p, ex in held])
    by_option: dict[str, list[list[float]]] = {}
    for (_, ex), row in zip(held, rows):
        by_option.setdefault(example_key(prep, ex.answer), []).append(row)
    return _mean([_mean(group) for group in by_option.values()])


#: From this many examples on, the priors' prompts are crossed halves (below, leave one out).
CROSSED_HALVES_FROM = 6


def held_out(prep: Prepared) -> list[tuple[Prepared, Any]]:
    """(the question with the examples it is asked with, the example asked), in asking order.

    Few examples: leave one out (K prompts, each read whole by the server). More: crossed halves,
    in an order where each prompt extends the one before, so the server's prompt cache reads every
    example about twice in all instead of K times: the second half, each after the first half and
    its own earlier examples; then the first half, each after the second half and its earlier ones.
    Every example is still asked with at least half of the others, and never with itself.
    """
    shots = prep.examples
    if len(shots) < CROSSED_HALVES_FROM:
        return [(dataclasses.replace(prep, examples=shots[:i] + shots[i + 1:]), ex) for i, ex in enumerate(shots)]
    h = len(shots) // 2
    first, second = shots[:h], shots[h:]
    return ([(dataclasses.replace(prep, examples=first + second[:j]), ex) for j, ex in enumerate(second)]
            + [(dataclasses.replace(prep, examples=second + first[:j]), ex) for j, ex in enumerate(first)])


def _mean(rows: list[list[float]]) -> list[float]:
    return [sum(col) / len(rows) for col in zip(*rows)]


def _remembered_rows(ask: Ask, method: str, style: LabelStyle, surface: str, kind: str,
                     asks: list[tuple[Prepared, Any]]) -> Flow[list[list[float]]]:
    """One label distribution per (question, state) asked: the priors' raw material, kept in memory
    by the prompt they correct (with the state left out), so each is asked once per client."""
    opts = ask.options
    symbols = symbols_of(ask.prep, style.fmt)
    prompt = render(ask.prep, CONTENT_FREE[0], layout=opts.layout, fmt=style.fmt)  # type: ignore[arg-type]
    key = (ask.model, surface, method, kind, json.dumps(prompt, sort_keys=True))
    known = ask.memory.prior_for(key)
    if known is not None:
        return known
    rows = []
    for prep, state in asks:
        messages = render(prep, state, layout=opts.layout, fmt=style.fmt)  # type: ignore[arg-type]
        fields, extra = request_fields(method, prep, opts.method_config, symbols)
        ask.record.prior_calls += 1
        parsed = yield from call(ask, surface, messages, fields, extra)
        try:
            rows.append(read_labels(parsed.logprobs, symbols, content=parsed.content, missing="floor",
                                    method=method, fold=style.fold).probs)
        except AmbiguousNamesError as exc:  # a prior needs no continuation: the names it told apart
            rows.append(softmax_labels(symbols, exc.best, exc.returned, "floor", exc.token, method).probs)
    ask.memory.store_prior(key, rows)
    return rows


def json_pass(ask: Ask, method: str) -> Flow[list[float]]:
    """One JSON object (structured, discrete or System 2 ratings) → a distribution."""
    prep, opts, rec = ask.prep, ask.options, ask.record
    rec.methods.append(method)
    surface = ask.surface(method)
    fmt = answer_format(method, prep)

    def read(parsed: Parsed) -> Any:
        check_complete(parsed, rec.surfaces[-1])
        content = parsed.content or ""
        if not content.strip():
            if parsed.reasoning:
                raise MalformedAnswerError("the server separated reasoning from the answer and sent no answer (a "
                                           "reasoning-only reply); give the model more output budget or turn thinking off")
            raise MalformedAnswerError("the reply is empty")
        obj = parse_object(strip_think(content))
        return read_json(method, prep.keys, prep.labels, prep.kind, obj, opts.normalize_probabilities)

    def repairable(exc: Exception) -> bool:
        return isinstance(exc, (MalformedAnswerError, IncompleteAnswerError)) and getattr(exc, "field", None) != "state"

    messages = render(prep, ask.state, layout=opts.layout, fmt=fmt,  # type: ignore[arg-type]
                      example_json=example_json(method, prep))
    fields, extra = request_fields(method, prep, opts.method_config)
    parsed, ro = yield from ask_until_read(ask, surface, messages, fields, extra, read, repairable,
                                           "Return only a JSON object matching the schema.")
    rec.readout = ro.debug()
    if parsed.reasoning:
        rec.readout["reasoning"] = parsed.reasoning
    rec.note("readout", rec.readout)
    return ro.probs


def ask_until_read(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
                   read: Callable[[Parsed], T], repairable: Callable[[Exception], bool],
                   repair: str) -> Flow[tuple[Parsed, T]]:
    """Ask, read; a reply that cannot be read earns ``n_retry_malformed`` repair turns saying why."""
    last = ask.options.n_retry_malformed
    for attempt in range(last + 1):
        parsed = yield from call(ask, surface, messages, fields, extra)
        try:
            return parsed, read(parsed)
        except (LabelReadoutError, MalformedAnswerError, IncompleteAnswerError) as exc:
            if attempt == last or not repairable(exc):
                raise
            ask.record.retry_reasons.append(str(exc))
            messages = messages + [
                {"role": "assistant", "content": parsed.content or ""},
                {"role": "user", "content": f"Your previous reply was invalid: {exc}. {repair}"},
            ]
    raise AssertionError("unreachable")


def call(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any],
         extra: dict[str, Any]) -> Flow[Parsed]:
    """Send one request and read the reply; refusals and filters raise here.

    A refused optional field is dropped and the call re-asked (remembered for the client); under
    api='auto' a 404 from the Responses route that does not name the model moves to Chat Completions.
    """
    rec = ask.record
    while True:
        request = build_call(surface, ask.model, messages, fields, extra, ask.options.extra_body)
        strip_fields(request, ask.memory.refused_on((ask.model, surface)))
        rec.note("request", request.kwargs)
        rec.usage.n_calls += 1
        rec.surfaces.append(surface)
        try:
            reply = yield request
        except ProviderError as exc:
            rec.usage.n_retries += exc.n_retries
            moved = _on_provider_error(ask, surface, request, exc)
            if moved is None:
                raise
            surface = moved
            continue
        rec.usage.n_retries += reply.n_retries
        parsed = parse_reply(surface, reply.body)
        rec.usage.add_tokens(parsed.input_tokens, parsed.output_tokens)
        rec.note("response", reply.body)
        check_refusal(parsed)
        return parsed


def _on_provider_error(ask: Ask, surface: str, request: Call, exc: ProviderError) -> str | None:
    """The surface to re-ask on (a missing route moves, a refused optional field is dropped), or None."""
    if ask.options.api == "auto" and surface != CHAT and CHAT in ask.speaks and route_missing(exc, ask.model):
        ask.memory.mark_route_missing(surface)
        ask.record.retry_reasons.append(f"{surface} answered 404; re-asked on {CHAT}")
        return CHAT
    name = refused_field(exc, sent_fields(request.kwargs), surface)
    if name is None:
        return None
    if name in READOUT_FIELDS:
        raise FieldRefusedError(str(exc), field=name, status_code=exc.status_code,
                                provider_message=exc.provider_message, body=exc.body) from exc
    schema = (request.kwargs.get("response_format") or {}).get("type") == "json_schema"
    ask.memory.refuse((ask.model, surface),
                      "response_format:json_schema" if name == "response_format" and schema else name)
    ask.record.retry_reasons.append(f"the server refuses {name!r}; re-asked without it")
    return surface


def _has_tokens(logprobs: Any) -> bool:
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return bool(content)


__all__ = ["Ask", "answer", "system1", "token_pass", "label_pass", "read_tokens", "content_free_prior", "examples_prior", "json_pass",
           "ask_until_read", "call", "CONTENT_FREE", "Reply"]
