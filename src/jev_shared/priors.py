"""Priors: the model's lean, measured once per prompt and backend and divided out (``debias``).

Zero-shot, the answers to content-free states (Zhao et al. 2021, "Calibrate Before Use"); with
examples that show every option, the examples' own held-out answers. The rows are kept in the
client's :class:`~jev_shared.memory.Memory` by a fingerprint of the prompt, so each is asked once.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from .asking import Ask, call, intent_of
from .calls import CONTENT_FREE_STATES, Flow, Intent
from .exact import is_exact, own_token_fold, still_exact
from .labels import AmbiguousNamesError, LabelStyle
from .methods import path_plan_for, request_fields
from .models import debias_strength
from .pathread import Windows, path_fields, read_path
from .prompt import render, symbols_of
from .questions import Prepared, example_key
from .readon import continue_read
from .readout import PRIOR_FLOOR, divide_prior, read_labels, softmax_labels, split_shared
from .surfaces.registry import SURFACES

#: debias=True asks each prompt about these states once (Zhao et al. 2021, "Calibrate Before Use").
CONTENT_FREE = CONTENT_FREE_STATES


def debias_prior(ask: Ask, method: str, style: LabelStyle, surface: str) -> Flow[list[float] | None]:
    """The lean to divide out, or None. Examples that show every option: their own (leave-one-out);
    no examples: the content-free states'; examples that leave options out: content-free under
    ``debias=True`` only (measured to over-correct, docs/decisions.md)."""
    prep, debias = ask.prep, ask.options.debias
    if debias is False:  # before the strength: reading the model's name is no work for nothing
        return None
    strength = 1.0 if debias is True else debias_strength(ask.model, prep.kind, bool(prep.examples))
    if strength <= 0.0:
        return None
    if shows_every_option(prep):
        return (yield from examples_prior(ask, method, style, surface, strength))
    if prep.examples and debias == "auto":
        return None
    return powered((yield from content_free_prior(ask, method, style, surface)), strength)


def powered(prior: list[float], strength: float) -> list[float]:
    """The prior raised to ``strength`` (0.5: half the lean divided out, in log space)."""
    return prior if strength == 1.0 else [max(p, PRIOR_FLOOR) ** strength for p in prior]


def shows_every_option(prep: Prepared) -> bool:
    return len(prep.examples) >= 2 and {example_key(prep, ex.answer) for ex in prep.examples} == set(prep.keys)


def content_free_prior(ask: Ask, method: str, style: LabelStyle, surface: str) -> Flow[list[float]]:
    """The answer to content-free states, asked once per prompt and model, then remembered."""
    asks = [(ask.prep, state) for state in CONTENT_FREE]
    return _mean((yield from _remembered_rows(ask, method, style, surface, "content-free", asks)))


def examples_prior(ask: Ask, method: str, style: LabelStyle, surface: str,
                   strength: float = 1.0) -> Flow[list[float]]:
    """The examples' own lean: each example's state asked with others as its examples (never itself);
    the mean answer per true option, averaged over the options, is what the model adds to in-domain
    states whatever they say. Asked once per prompt and model, then remembered. The answers, divided
    by it, are labelled: kept in the record, they calibrate the question itself (client.py)."""
    prep = ask.prep
    held = held_out(prep)
    rows = yield from _remembered_rows(ask, method, style, surface, "held-out", [(p, ex.state) for p, ex in held],
                                       asking_order(len(held), len(prep.examples)))
    by_option: dict[str, list[list[float]]] = {}
    for (_, ex), row in zip(held, rows):
        by_option.setdefault(example_key(prep, ex.answer), []).append(row)
    prior = powered(_mean([_mean(group) for group in by_option.values()]), strength)
    ask.record.labelled = [(divide_prior(row, prior), example_key(prep, ex.answer)) for (_, ex), row in zip(held, rows)]
    return prior


#: From this many examples on, the priors' prompts are crossed halves (below, leave one out).
CROSSED_HALVES_FROM = 6


def held_out(prep: Prepared) -> list[tuple[Prepared, Any]]:
    """(the question with the examples it is asked with, the example asked), in the order the rows are kept.

    Few examples: leave one out (K prompts; :func:`asking_order` asks the last first). More: crossed halves,
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


def asking_order(n: int, shots: int) -> list[int]:
    """The order the held-out prompts are sent in (their rows are kept in :func:`held_out`'s order). Leave one
    out: the last example first, since its prompt is the answer's own up to the state, so the server's prompt
    cache serves it from the slot the answer left (one token read, not the examples again); each one before it
    then shares the examples up to its own. Crossed halves already extend the answer's prompt: as they are."""
    return list(range(n))[::-1] if shots < CROSSED_HALVES_FROM else list(range(n))


def _mean(rows: list[list[float]]) -> list[float]:
    return [sum(col) / len(rows) for col in zip(*rows)]


def _remembered_rows(ask: Ask, method: str, style: LabelStyle, surface: str, kind: str,
                     asks: list[tuple[Prepared, Any]], order: list[int] | None = None) -> Flow[list[list[float]]]:
    """One label distribution per (question, state) asked: the priors' raw material, kept in memory
    by the prompt they correct (with the state left out) and the readout that read them (the exact one or
    the top-k window: a prior measured through one is not the other's lean), so each is asked once.

    Each is read as the answers are: a prefix several names share is read on (``alarm`` → ``_query``,
    ``_set``), and on an exact read a name of a shared token that does not lead gets its share of it. Read
    with the shared names floored, the prior called the model's strongest lean (the first option's
    prefix) its weakest, and dividing by it crowned that prefix's names. Sent in ``order`` (default:
    as listed), kept as listed."""
    opts = ask.options
    symbols = symbols_of(ask.prep, style.fmt)
    prompt = render(ask.prep, CONTENT_FREE[0], layout=opts.layout, fmt=style.fmt)  # type: ignore[arg-type]
    readout = "exact" if is_exact(*request_fields(method, ask.prep, opts.method_config, symbols)) else \
        f"top{opts.top_logprobs}"
    key = (ask.model, surface, method, kind, readout + READ_ON_TAG, json.dumps(prompt, sort_keys=True))
    known = ask.memory.prior_for(key, (len(asks), len(symbols)))
    if known is not None:
        return known
    rows: list[list[float]] = [[] for _ in asks]
    for i in order or range(len(asks)):
        prep, state = asks[i]
        messages = render(prep, state, layout=opts.layout, fmt=style.fmt)  # type: ignore[arg-type]
        fields, extra = request_fields(method, prep, opts.method_config, symbols)
        exact = still_exact(is_exact(fields, extra), ask.memory.refused_on((ask.model, surface)))
        reads_on = style.named_choice and SURFACES[surface].prefill
        plan = path_plan_for(method, symbols, opts.method_config) if exact and reads_on else None
        fields, extra = path_fields(plan, fields, extra)
        ask.record.prior_calls += 1
        intent = intent_of(state) if kind == "content-free" else Intent.PRIOR
        parsed = yield from call(ask, surface, messages, fields, extra, intent)
        pre: Windows = {}
        if plan is not None and still_exact(exact, ask.memory.refused_on((ask.model, surface))):
            parsed, pre = read_path(parsed, plan)
        try:
            fold = own_token_fold(style.fold, parsed.logprobs, opts.token_ids, symbols) if exact else style.fold
            rows[i] = read_labels(parsed.logprobs, symbols, content=parsed.content, missing="floor",
                                  method=method, fold=fold, split=exact).probs
        except AmbiguousNamesError as exc:
            if reads_on:
                calls = ask.record.usage.n_calls
                ro = yield from continue_read(ask, surface, messages, fields, extra, symbols, exc, note=False, pre=pre)
                ask.record.prior_calls += ask.record.usage.n_calls - calls
                rows[i] = ro.probs
            else:  # no read-on here: the names of the shared token get its even share
                best = split_shared(symbols, exc.best, exc.shared)
                rows[i] = softmax_labels(symbols, best, exc.returned, "floor", exc.token, method).probs
    ask.memory.store_prior(key, rows)
    return rows


#: In the prior's memory key: rows read the way the answers are (a shared prefix read on; a token that is one
#: name's own first token counted for it, exact.own_token_fold), not the rows an earlier version kept.
READ_ON_TAG = "+read-on+own+path"
