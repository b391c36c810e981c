"""Continuation read: where the window's best token starts several option names, ask once more with
that token already answered (an assistant prefill) and read the next token's window.

The chain stays a real distribution: each name in the shared-prefix group gets
``P(prefix) · P(rest | prefix)``, the conditional normalised over the group; names the window told
apart keep their own logprob; the whole is renormalised over the labels.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from .labels import norm_token
from .readout import answer_entry, field_of

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
