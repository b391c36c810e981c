"""Read-on: names that share a prefix are told apart by one-token continuation calls.

Where the best first token starts several option names (``alarm`` of ``alarm_query`` / ``alarm_set``),
the flow asks again with that token prefilled and reads the next one, until the names part (at most
:data:`CONTINUATION_DEPTH` calls). The debias prior is read the same way (:mod:`priors`), so a lean to a
shared prefix is measured as the answers read it, never floored.

Each continuation call has that token already answered (an assistant prefill) and reads the next token's window.
On llama.cpp the first call has written the likeliest names out already (:mod:`pathread`): a window its path
holds is read from it, no call made; and a token every remaining name goes on with is prefilled, never asked.
The chain stays a real distribution: each name in the shared-prefix group gets ``P(prefix) · P(rest | prefix)``,
the conditional normalised over the group; names the window told apart keep their own logprob; the whole is
renormalised over the labels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from .asking import Ask, Messages, call
from .calls import Flow, Intent
from .exact import EXACT_SOURCE, exact_fields, forced, is_exact, next_ids, still_exact, window_only
from .labels import AmbiguousNamesError, names_starting, norm_token
from .pathread import Windows, window_for
from .readout import Readout, answer_entry, field_of, softmax_labels, split_shared, unread

#: At most this many continuation calls read a shared prefix on (``declined`` → ``_`` → ``card``). Five, not
#: three: names sharing four tokens (``lost_or_stolen_card`` / ``_phone``; ``CASH_BONUS`` = ``C``·``ASH``·``_B``·``ONUS``,
#: the whole start of ``CASH_BONUS_EXPIRY``) were split evenly at three and the first listed won every tie
#: (banking77's such items: 5 → 11 of 16 right at five); a call is spent only
#: where the names still share the token read.
CONTINUATION_DEPTH = 5


def continue_read(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
                  symbols: tuple[str, ...], exc: AmbiguousNamesError, *, note: bool = True,
                  pre: Windows | None = None) -> Flow[Readout]:
    """One more one-token call with the shared prefix already answered: P(name) = P(prefix)·P(rest | prefix)."""
    group = names_starting(exc.token, symbols)
    exact = still_exact(is_exact(fields, extra), ask.memory.refused_on((ask.model, surface)))
    fields, extra = window_only(fields, extra, ask.options.top_logprobs)  # the next token: the names' own, or the window
    ids = (exc.token_id,) if exact and exc.token_id is not None else None
    cond = yield from read_on(ask, surface, messages, fields, extra, exc.token, group, CONTINUATION_DEPTH, ids, pre)
    best = exc.best
    if exact:  # the names of other shared tokens: their share, not the floor (the read gave every first token)
        best = split_shared(symbols, best, {t: lp for t, lp in exc.shared.items() if t != exc.token})
    ro = softmax_labels(symbols, chain(exc.logprob, cond, best), exc.returned, "floor", exc.token, "logprobs")
    ro.source = (EXACT_SOURCE if exact else "logprobs") + "+continuation"
    if exact:  # the other shared tokens (" alarm" is read with "alarm": the same names)
        others = {t: lp for t, lp in exc.shared.items() if names_starting(t, symbols) != group}
        read = {**exc.best, **dict.fromkeys(group, 0.0)}  # the group read on has a reading of its own
        ro.unread = unread(symbols, read, others, exc.shared_ids)
    if note:
        ask.record.note("continuation", {"prefix": exc.token, "group": group, "conditional": cond})
    return ro


def read_on(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
            prefix: str, group: list[str], depth: int, prefix_ids: tuple[int, ...] | None = None,
            pre: Windows | None = None) -> Flow[dict[str, float]]:
    """P(name | prefix) over the group; a next token still shared by several names is read on in turn, so
    names that share more than one token are told apart by the model, not tied and broken by their order.
    Where the prefix is the names' own first tokens (``prefix_ids``, an exact read), the names' own next
    tokens are read (:mod:`exact`), not the window: from the path the first call wrote where it went this
    way (``pre``, :mod:`pathread`), else by a call."""
    paths = ask.options.token_paths
    more_ids, more_text = forced(group, prefix_ids, paths, ask.options.token_texts)
    if more_ids and prefix_ids:  # tokens every name goes on with: certain, so prefilled rather than asked
        prefix, prefix_ids = prefix + more_text, prefix_ids + more_ids
    prefill = messages + [{"role": "assistant", "content": prefix}]
    ids = next_ids(group, prefix_ids, paths)
    sent, sent_extra = fields, extra
    if ids:
        exact, exact_extra = exact_fields(ids)
        sent, sent_extra = {**fields, **exact}, {**extra, **exact_extra}
    window = window_for(pre, prefix_ids, ids)
    if window is None:
        parsed = yield from call(ask, surface, prefill, sent, {**sent_extra, **PREFILL_FIELDS}, Intent.READ_ON)
        window = window_of(parsed.logprobs, parsed.content)
    lead = shared_lead(prefix, group, window) if depth > 1 else None
    splits = {}
    if lead is not None:
        token, hits = lead
        deeper = {paths[h][len(prefix_ids)] for h in hits} if ids and paths and prefix_ids else set()
        more = prefix_ids + (deeper.pop(),) if prefix_ids and len(deeper) == 1 else None
        splits[token] = yield from read_on(ask, surface, messages, fields, extra, prefix + token, hits, depth - 1, more,
                                           pre)
    return conditional(prefix, group, window, splits)


def lead_unread(ro: Readout, symbols: Sequence[str], probs: Sequence[float]) -> tuple[str, list[str]] | None:
    """The shared token not read on whose names lead ``probs`` (the answer, the prior divided out), with
    the names given a share of it; None when the answer is a name the model told apart already."""
    top = symbols[max(range(len(probs)), key=probs.__getitem__)]
    for token, (_, names) in ro.unread.items():
        if len(names) > 1 and top in names:
            return token, list(names)
    return None


def read_on_lead(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
                 symbols: tuple[str, ...], ro: Readout, probs: Sequence[float], pre: Windows | None = None) -> Flow[bool]:
    """Where the answer's lead is a name given an even share of a shared token (the first read went on with
    another token, and dividing out the prior put this one ahead), read that token on too, so its names are
    told apart by the model, not by their order; their share is split by what it reads (``ro.probs``, in
    place). True when it read."""
    lead = lead_unread(ro, symbols, probs)
    if lead is None:
        return False
    token, group = lead
    token_id, _ = ro.unread.pop(token)
    fields, extra = window_only(fields, extra, ask.options.top_logprobs)
    ids = (token_id,) if token_id is not None else None
    cond = yield from read_on(ask, surface, messages, fields, extra, token, group, CONTINUATION_DEPTH, ids, pre)
    where = {s: i for i, s in enumerate(symbols)}
    mass = sum(ro.probs[where[g]] for g in group)
    for g in group:
        ro.probs[where[g]] = mass * cond[g]
    ask.record.note("continuation", {"prefix": token, "group": group, "conditional": cond, "after": "prior"})
    return True


# --- the continuation read: its window, the names a token spells, the chain -----------------------------------

#: Sent with the continuation call: vLLM and SGLang continue a final assistant message only when
#: asked (``continue_final_message``, without a new generation prompt); llama.cpp continues one on
#: its own. A server that refuses the fields has them dropped and remembered (``flows.call``).
PREFILL_FIELDS = {"continue_final_message": True, "add_generation_prompt": False}

#: A token that ends the answer: the end of turn, or whitespace.
_END = re.compile(r"^\s*(<\|[^|>]*\|>|</s>|<eos>)?\s*$")


def window_of(logprobs: Any, content: str | None) -> list[tuple[str, float]]:
    """(token, logprob) of the continuation's first token: the sampled one and its alternatives."""
    entries = field_of(logprobs, "content") if logprobs is not None else None
    if not entries:
        return []
    entry = answer_entry(entries, content) if content and content.strip() else entries[0]
    out = [(str(field_of(entry, "token") or ""), field_of(entry, "logprob"))]
    out += [(str(field_of(c, "token") or ""), field_of(c, "logprob")) for c in field_of(entry, "top_logprobs") or []]
    return [(t, float(lp)) for t, lp in out if lp is not None and math.isfinite(float(lp))]


def matches(prefix: str, token: str, group: Sequence[str]) -> list[str]:
    """The names of ``group`` that ``prefix`` + ``token`` spells the start of (or ends, for an end token)."""
    done, joined = norm_token(prefix), norm_token(prefix + token)
    if _END.match(token) or joined == done:  # the answer ends at the prefix ("1" then "." or the end of turn)
        return [g for g in group if g.lower() == done]
    hits = [g for g in group if joined and g.lower().startswith(joined)]
    if not hits:  # a token that runs past the name's end ("1" + "0." for "10")
        hits = [g for g in group if joined.startswith(g.lower()) and not joined[len(g):len(g) + 1].isalnum()]
    return hits


def conditional(prefix: str, group: Sequence[str], window: list[tuple[str, float]],
                splits: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    """P(name | prefix) over the group, from the continuation window (summed over the tokens that
    spell it; a token several names share is split by ``splits[token]`` where that was read on,
    else evenly; a name absent is floored)."""
    mass = dict.fromkeys(group, 0.0)
    seen: set[str] = set()
    for token, lp in window:
        if token in seen:  # the sampled token is also in its own alternatives
            continue
        seen.add(token)
        hits = matches(prefix, token, group)
        split = (splits or {}).get(token)
        for g in hits:
            mass[g] += math.exp(lp) * (split.get(g, 0.0) if split else 1.0 / len(hits))
    floor = math.exp(min((lp for _, lp in window), default=-30.0))
    for g in group:
        if mass[g] == 0.0:
            mass[g] = floor
    total = sum(mass.values())
    return {g: m / total for g, m in mass.items()}


def shared_lead(prefix: str, group: Sequence[str], window: list[tuple[str, float]]) -> tuple[str, list[str]] | None:
    """The window's most likely token when it still starts several names of the group (``declined`` then
    ``_`` for ``declined_card_payment`` / ``declined_transfer``), with those names; else None."""
    for token, _ in sorted(window, key=lambda t: -t[1]):
        hits = matches(prefix, token, group)
        if hits:
            grows = len(norm_token(prefix + token)) > len(norm_token(prefix))
            return (token, hits) if len(hits) > 1 and grows else None
    return None


def chain(prefix_logprob: float, cond: dict[str, float], best: dict[str, float]) -> dict[str, float]:
    """Each group name's logprob as prefix + continuation, kept where it beats a reading of its own."""
    out = dict(best)
    for g, p in cond.items():
        lp = prefix_logprob + math.log(p)
        if g not in out or lp > out[g]:
            out[g] = lp
    return out
