"""Path read: names that share a first token told apart in the call that asks, not by continuation calls.

On the exact readout (:mod:`exact`) a token's reported probabilities are the model's own, renormalised over the
biased tokens. Biasing every token of every name (not only the first) and letting the call write the name out
(``max_tokens``: as many tokens as part the names) reports, at each token the call writes, the next token's
probabilities over the same biased set: the names' own continuations, read exactly, along the path the call took.
A continuation read finds its window here (:func:`readon.read_on`) and makes no call.

The call samples its path at :data:`PATH_TEMPERATURE`, seeded (the same prompt takes the same path), so it follows
the likeliest names; the probabilities it reports are those at that temperature, turned back here (a logprob
times the temperature, up to a constant the renormalisation over the names drops). A prefix the path did not
take is read by a call, as before.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .calls import MAX_READ_TOKENS
from .exact import EXACT_BIAS, exact_ids

#: The path's sampling temperature. Low enough that the path is the likeliest name's (a rival at half the
#: probability is taken one time in ten), high enough that every biased token keeps a reported probability
#: (at 0.3 a token at 1e-9 of the leader still reads about 1e-30; at 0.2 some underflow to 0).
PATH_TEMPERATURE = 0.3
#: At most this many tokens written (the first and the read-on's five).
MAX_PATH_TOKENS = MAX_READ_TOKENS

#: Per prefix of the path (its token ids): the next token's (text, logprob, id) candidates, turned back.
Windows = dict[tuple[int, ...], list[tuple[str, float, int]]]


@dataclass(frozen=True)
class PathPlan:
    """What one path read biases, how far it writes, and which of its first token's candidates are names'."""

    first_ids: frozenset[int]
    biased: tuple[int, ...]
    depth: int
    #: GBNF that keeps the path on some name's spelling (llama.cpp resamples a token that leaves it)
    grammar: str


def path_plan(symbols: Sequence[str], token_ids: Mapping[str, int] | None,
              paths: Mapping[str, tuple[int, ...]] | None,
              texts: Mapping[str, tuple[str, ...]] | None = None) -> PathPlan | None:
    """The plan where two names share a first token and every name's tokens are known; else None (one token
    parts the names, or a continuation would read the window)."""
    first = exact_ids(symbols, token_ids)
    if not first or not paths or any(not paths.get(s) for s in symbols):
        return None
    spelled = [paths[s] for s in symbols]
    if len({p[0] for p in spelled}) == len(spelled):
        return None
    parting = {s: _parting(paths[s], spelled) for s in symbols}
    depth = min(max(parting.values()), MAX_PATH_TOKENS)
    biased = set(first) | {t for p in spelled for t in p[:depth]}
    grammar = _grammar(symbols, parting, texts or {}, token_ids or {})
    return PathPlan(frozenset(first), tuple(sorted(biased)), depth, grammar)


#: The casings a first token's bias may read a name in (:func:`exact.spellings`).
_CASINGS: tuple[Callable[[str], str], ...] = (lambda w: w, str.lower, lambda w: w[:1].upper() + w[1:])


def _grammar(symbols: Sequence[str], parting: Mapping[str, int], texts: Mapping[str, tuple[str, ...]],
             token_ids: Mapping[str, int]) -> str:
    """Any name up to where it parts from the others (its tokens' text, where known; else the whole name), so
    the call stops writing there: a name whose first token is its own costs one token more, not the depth. In
    each casing the first token's bias reads (as given, lowercased, capitalised), a space first or not: so the
    grammar never takes a first token the read counts away from it, and holds no form nobody biased."""
    forms: dict[str, None] = {}
    for s in symbols:
        head = "".join(texts[s][:parting[s]]) if s in texts else s
        for case in _CASINGS:
            if case is _CASINGS[0] or case(s) in token_ids or " " + case(s) in token_ids:
                forms[case(head)] = None
    return 'root ::= " "? (' + " | ".join(json.dumps(f) for f in forms) + ")"


def _parting(path: tuple[int, ...], spelled: Sequence[tuple[int, ...]]) -> int:
    """Tokens written before ``path`` is no other name's start (one more where it ends inside another's)."""
    for k in range(1, len(path) + 1):
        if sum(1 for q in spelled if q[:k] == path[:k]) == 1:
            return k
    return len(path) + 1


def path_fields(plan: PathPlan | None, fields: Mapping[str, Any],
                extra: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The exact read's (fields, extra_body), biasing every name's tokens and writing ``plan.depth`` of them
    (no plan: as they are)."""
    if plan is None:
        return dict(fields), dict(extra)
    return ({**fields, "temperature": PATH_TEMPERATURE, "max_tokens": plan.depth, "top_logprobs": len(plan.biased),
             "logit_bias": {str(i): EXACT_BIAS for i in plan.biased}}, {**extra, "grammar": plan.grammar})


def split_path(logprobs: Any, plan: PathPlan) -> tuple[Any, Windows]:
    """(the first token's logprobs, as an exact read of the names' first tokens reports them; the windows after
    each prefix of the path), all turned back from the path's temperature."""
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        return logprobs, {}
    first = _turned(entries[0])
    if all(isinstance(c.get("id"), int) for c in first["top_logprobs"]):  # a later token's candidates dropped
        first["top_logprobs"] = [c for c in first["top_logprobs"] if c["id"] in plan.first_ids]
    windows: Windows = {}
    for k in range(1, len(entries)):
        ids = tuple(e.get("id") for e in entries[:k])
        if not all(isinstance(i, int) for i in ids):
            break
        entry = _turned(entries[k])
        windows[ids] = [(str(c.get("token") or ""), c["logprob"], c["id"]) for c in entry["top_logprobs"]
                        if isinstance(c.get("id"), int) and isinstance(c.get("logprob"), float)
                        and math.isfinite(c["logprob"])]
    return {**logprobs, "content": [first]}, windows


def _turned(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry's logprobs times the temperature: the model's own, up to a constant."""
    def back(c: dict[str, Any]) -> dict[str, Any]:
        lp = c.get("logprob")
        return {**c, "logprob": lp * PATH_TEMPERATURE} if isinstance(lp, (int, float)) and not isinstance(lp, bool) \
            else dict(c)
    out = back(entry)
    out["top_logprobs"] = [back(c) for c in entry.get("top_logprobs") or [] if isinstance(c, dict)]
    return out


def window_for(windows: Mapping[tuple[int, ...], list[tuple[str, float, int]]] | None,
               prefix_ids: tuple[int, ...] | None, ids: Sequence[int] | None) -> list[tuple[str, float]] | None:
    """The window a continuation read after ``prefix_ids`` would get (its candidates ``ids``), where the path
    went that way; else None (a call reads it)."""
    if not windows or not prefix_ids or not ids or prefix_ids not in windows:
        return None
    wanted = set(ids)
    found = [(t, lp) for t, lp, i in windows[prefix_ids] if i in wanted]
    return found or None


def read_path(parsed: Any, plan: PathPlan) -> tuple[Any, Windows]:
    """(``parsed`` as the one-token reply its first token is, the windows along its path)."""
    logprobs, windows = split_path(parsed.logprobs, plan)
    entries = logprobs.get("content") if isinstance(logprobs, dict) else None
    token = entries[0].get("token") if isinstance(entries, list) and entries else None
    first = dataclasses.replace(parsed, logprobs=logprobs, content=token if isinstance(token, str) else parsed.content)
    return first, windows
