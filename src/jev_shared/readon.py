"""Read-on: names that share a prefix are told apart by one-token continuation calls.

Where the best first token starts several option names (``alarm`` of ``alarm_query`` / ``alarm_set``),
the flow asks again with that token prefilled and reads the next one, until the names part (at most
:data:`CONTINUATION_DEPTH` calls). The debias prior is read the same way (:mod:`priors`), so a lean to a
shared prefix is measured as the answers read it, never floored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .asking import Ask, Messages, call
from .calls import Flow, Intent
from .continuation import PREFILL_FIELDS, chain, conditional, shared_lead, window_of
from .exact import EXACT_SOURCE, exact_fields, is_exact, next_ids, still_exact, window_only
from .labels import AmbiguousNamesError, names_starting
from .readout import Readout, softmax_labels, split_shared, unread

#: At most this many continuation calls read a shared prefix on (``declined`` → ``_`` → ``card``). Five, not
#: three: names sharing four tokens (``lost_or_stolen_card`` / ``_phone``; ``CASH_BONUS`` = ``C``·``ASH``·``_B``·``ONUS``,
#: the whole start of ``CASH_BONUS_EXPIRY``) were split evenly at three and the first listed won every tie
#: (banking77's such items: 5 → 11 of 16 right at five); a call is spent only
#: where the names still share the token read.
CONTINUATION_DEPTH = 5


def continue_read(ask: Ask, surface: str, messages: Messages, fields: dict[str, Any], extra: dict[str, Any],
                  symbols: tuple[str, ...], exc: AmbiguousNamesError, *, note: bool = True) -> Flow[Readout]:
    """One more one-token call with the shared prefix already answered: P(name) = P(prefix)·P(rest | prefix)."""
    group = names_starting(exc.token, symbols)
    exact = still_exact(is_exact(fields, extra), ask.memory.refused_on((ask.model, surface)))
    fields, extra = window_only(fields, extra, ask.options.top_logprobs)  # the next token: the names' own, or the window
    ids = (exc.token_id,) if exact and exc.token_id is not None else None
    cond = yield from read_on(ask, surface, messages, fields, extra, exc.token, group, CONTINUATION_DEPTH, ids)
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
            prefix: str, group: list[str], depth: int,
            prefix_ids: tuple[int, ...] | None = None) -> Flow[dict[str, float]]:
    """P(name | prefix) over the group; a next token still shared by several names is read on in turn, so
    names that share more than one token are told apart by the model, not tied and broken by their order.
    Where the prefix is the names' own first tokens (``prefix_ids``, an exact read), the names' own next
    tokens are read (:mod:`exact`), not the window."""
    prefill = messages + [{"role": "assistant", "content": prefix}]
    paths = ask.options.token_paths
    ids = next_ids(group, prefix_ids, paths)
    sent, sent_extra = fields, extra
    if ids:
        exact, exact_extra = exact_fields(ids)
        sent, sent_extra = {**fields, **exact}, {**extra, **exact_extra}
    parsed = yield from call(ask, surface, prefill, sent, {**sent_extra, **PREFILL_FIELDS}, Intent.READ_ON)
    window = window_of(parsed.logprobs, parsed.content)
    lead = shared_lead(prefix, group, window) if depth > 1 else None
    splits = {}
    if lead is not None:
        token, hits = lead
        deeper = {paths[h][len(prefix_ids)] for h in hits} if ids and paths and prefix_ids else set()
        more = prefix_ids + (deeper.pop(),) if prefix_ids and len(deeper) == 1 else None
        splits[token] = yield from read_on(ask, surface, messages, fields, extra, prefix + token, hits, depth - 1, more)
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
                 symbols: tuple[str, ...], ro: Readout, probs: Sequence[float]) -> Flow[bool]:
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
    cond = yield from read_on(ask, surface, messages, fields, extra, token, group, CONTINUATION_DEPTH, ids)
    where = {s: i for i, s in enumerate(symbols)}
    mass = sum(ro.probs[where[g]] for g in group)
    for g in group:
        ro.probs[where[g]] = mass * cond[g]
    ask.record.note("continuation", {"prefix": token, "group": group, "conditional": cond, "after": "prior"})
    return True
