"""Flows: one question's whole decision, as a generator that yields calls and is sent replies.

A flow holds every choice (method, fallbacks, repair turns, escalation) and does no I/O: the
drivers in :mod:`drive` send its calls (httpx's ``auth_flow`` pattern, h11's sans-I/O rule). So the
sync and async clients run the very same code, and a test can drive a flow by hand::

    flow = answer(ask)
    call = next(flow)                  # the first request
    call = flow.send(Reply(body, 0.0)) # its reply; StopIteration carries the Answer

Each function reads one :class:`Ask` and writes only to ``ask.record``; the requests themselves
are :mod:`asking`'s, the debias priors :mod:`priors`'.
"""

from __future__ import annotations

from typing import Any

from .answers import Answer, answer_confidence, build_answer
from .asking import Ask, ask_until_read, call
from .calls import Flow, Reply
from .errors import FieldRefusedError, IncompleteAnswerError, LabelReadoutError, MalformedAnswerError, ProviderError
from .exact import EXACT_SOURCE, is_exact, own_token_fold, still_exact
from .faults import cannot_carry, logprobs_value_complaint
from .json_readout import parse_object, read_json, strip_think
from .labels import FALLBACK_TRUST, LETTERS_FALLBACK, AmbiguousNamesError, LabelStyle, style_for
from .methods import TOKEN_READOUT, answer_format, example_json, path_plan_for, request_fields
from .pathread import Windows, path_fields, read_path
from .priors import CONTENT_FREE, content_free_prior, debias_prior, examples_prior
from .prompt import render, symbols_of
from .questions import MAX_SINGLE_TOKEN_LABELS
from .readon import CONTINUATION_DEPTH, continue_read, read_on, read_on_lead
from .readout import Readout, divide_prior, humble, read_labels
from .surfaces.common import check_complete
from .surfaces.registry import SURFACES, fallback_of
from .surfaces.wire import Parsed


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
    if letters_only or not SURFACES[key[1]].logprobs or ask.memory.answers_with_structured(key):
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
    """A label readout; under api='auto' a surface that carries no distribution moves to its fallback."""
    surface = ask.surface(method)
    try:
        return (yield from label_pass(ask, method, surface))
    except (LabelReadoutError, ProviderError) as exc:
        target = fallback_of(surface, ask.speaks) if ask.options.api == "auto" else None
        if target is None or not cannot_carry(exc):
            raise
        ask.memory.mark_no_distribution((ask.model, surface))
        ask.record.retry_reasons.append(f"{surface} carries no distribution here ({exc}); re-asked on {target}")
        return (yield from label_pass(ask, method, target))


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
        if plan is not None and exact_now():  # names that share a first token: their path, written out
            parsed, windows = read_path(parsed, plan)
            pre.clear()
            pre.update(windows)
        if not (parsed.content or "").strip() and parsed.reasoning and not _has_tokens(parsed.logprobs):
            raise LabelReadoutError("the server sent reasoning but no answer (a reasoning-only reply); turn thinking off")
        split = exact_now()
        fold = own_token_fold(style.fold, parsed.logprobs, opts.token_ids, symbols) if split else style.fold
        ro = read_labels(parsed.logprobs, symbols, content=parsed.content, missing=missing,
                         method=method, fold=fold, split=split)
        if ro.no_signal and opts.strict_labels:
            raise LabelReadoutError(f"first token {ro.sampled!r} is not one of the labels {list(symbols)}, nor is any "
                                    "token in the window")
        return ro

    def repairable(exc: Exception) -> bool:
        return isinstance(exc, LabelReadoutError) and not exc.provider_cannot and not isinstance(exc, AmbiguousNamesError)

    def exact_now() -> bool:  # a refused exact field was dropped and the window read (surfaces/vllm.py)
        return exact and still_exact(exact, ask.memory.refused_on((ask.model, rec.surfaces[-1])))

    repair = f"Reply with exactly one of these labels and nothing else: {', '.join(symbols)}."
    messages = render(prep, ask.state, layout=opts.layout, fmt=style.fmt)  # type: ignore[arg-type]
    fields, extra = request_fields(method, prep, opts.method_config, symbols)
    exact = is_exact(fields, extra)
    reads_on = style.named_choice and SURFACES[surface].prefill  # a shared prefix rides as a prefill
    plan = path_plan_for(method, symbols, opts.method_config) if exact and reads_on else None
    fields, extra = path_fields(plan, fields, extra)
    pre: Windows = {}
    try:
        _, ro = yield from ask_until_read(ask, surface, messages, fields, extra, read, repairable, repair)
        if exact_now() and not ro.labels_missing:  # every symbol's own first token read, no window (exact.py)
            ro.source = EXACT_SOURCE
    except AmbiguousNamesError as exc:
        if not reads_on:
            raise
        ro = yield from continue_read(ask, surface, messages, fields, extra, symbols, exc, pre=pre)
    return (yield from _debiased(ask, method, style, surface, (messages, fields, extra), ro, pre))


def _debiased(ask: Ask, method: str, style: LabelStyle, surface: str, request: tuple[Any, Any, Any],
              ro: Readout, pre: Windows) -> Flow[list[float]]:
    """A read window → the answer: noted, humbled where letters stood in for names, divided by the prior, and
    read on where a shared prefix leads after the division."""
    rec, symbols = ask.record, symbols_of(ask.prep, style.fmt)
    rec.readout = ro.debug()
    rec.note("readout", rec.readout)
    if style.fallback:
        ro.probs = humble(ro.probs, FALLBACK_TRUST)
        rec.readout["fallback_trust"] = FALLBACK_TRUST
    prior = yield from debias_prior(ask, method, style, surface)
    if prior is not None:
        rec.prior = dict(zip(symbols, prior))
        rec.readout["prior"] = rec.prior
    probs = ro.probs if prior is None else divide_prior(ro.probs, prior)
    reads_on = style.named_choice and SURFACES[surface].prefill
    if ro.unread and reads_on and (yield from read_on_lead(ask, surface, *request, symbols, ro, probs, pre)):
        probs = ro.probs if prior is None else divide_prior(ro.probs, prior)
    return probs


def json_pass(ask: Ask, method: str) -> Flow[list[float]]:
    """One JSON object (structured, discrete or System 2 ratings) → a distribution."""
    prep, opts, rec = ask.prep, ask.options, ask.record
    rec.methods.append(method)
    surface = ask.surface(method)
    fmt = answer_format(method, prep)

    def read(parsed: Parsed) -> Any:
        check_complete(parsed, SURFACES[rec.surfaces[-1]].budget_field)
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


def _has_tokens(logprobs: Any) -> bool:
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return bool(content)


__all__ = ["Ask", "answer", "system1", "token_pass", "label_pass", "read_tokens", "content_free_prior", "examples_prior", "json_pass",
           "ask_until_read", "call", "CONTENT_FREE", "Reply", "CONTINUATION_DEPTH", "continue_read", "read_on"]
