"""Exact readout: read every answer word's own first token, not the top-k window.

A window of the 20 likeliest tokens leaves options out at 40+ options (each then floored or read as 0).
Where the server allows it, the engine reads the labels' own tokens instead. On llama.cpp (the embedded
server) that is one call, as cheap as the window (measured, docs/quality.md):

* ``logit_bias`` of +:data:`EXACT_BIAS` on the first token of every spelling of every answer word (found
  with the server's own tokenizer), so those tokens, and only those, lead the distribution;
* ``post_sampling_probs`` with ``temperature: 1`` and the truncating samplers off (``top_k: 0``,
  ``top_p: 1``, ``min_p: 0``): the reply's ``top_probs`` are then the model's own probabilities
  renormalised over the biased tokens (an equal bias cancels in the ratio), every one of them;
* ``top_logprobs`` (llama.cpp's ``n_probs``) sized to the number of those tokens.

A prefix several names share (``alarm`` of ``alarm_query`` / ``alarm_set``) is read on: in the first call,
which writes the names out with all their tokens biased (:mod:`pathread`), or by a continuation call
(:mod:`readon`); where that prefix is the names' own first token, the call biases the names' own next
tokens (:func:`next_ids`) in the same way, else it reads the window.

Measured and left: ``top_logprobs`` above 20 is accepted but still a window (a rare label may rank below
any k); a GBNF grammar with ``post_sampling_probs`` returns tokens the grammar forbids (llama.cpp applies
the grammar only when the sampled token breaks it); ``logit_bias`` alone leaves the raw ``top_logprobs``
as they were (they are read before the samplers). OpenAI (capped at 20) and every other backend keep the
window: only a client whose :class:`~jev_shared.backend.Backend` says ``exact_readout`` (``LocalServer.client()``) gets this.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .labels import AMBIGUOUS, Fold
from .readout import answer_entry, field_of

#: Added to each answer token's logit: far above any logit gap, so no other token outranks one of them.
EXACT_BIAS = 100
#: What ``debug["readout"]["source"]`` says of an exact read.
EXACT_SOURCE = "logprobs:exact"
#: The extra_body fields (llama.cpp's own) that make ``top_probs`` the renormalised distribution.
EXACT_EXTRA: dict[str, Any] = {"post_sampling_probs": True, "top_k": 0, "min_p": 0.0}
#: Most answer-word tokens one exact read asks for (255 options × their spellings stay far below).
MAX_EXACT_TOKENS = 2048
#: The fields that carry an exact read on some server (llama.cpp's; vLLM's ``logprob_token_ids``,
#: surfaces/vllm.py): one the server refused was dropped and the window read in its place (asking.py).
EXACT_FIELDS = frozenset({"logit_bias", "post_sampling_probs", "logprob_token_ids"})


def spellings(word: str) -> tuple[str, ...]:
    """The ways a model starts an answer word: as given (the prompt's form) and with a space first, then
    lowercased and capitalised (:class:`TokenTable` keeps those only where they are one whole token)."""
    forms = dict.fromkeys((word, word.lower(), word[:1].upper() + word[1:]))
    return tuple(dict.fromkeys(p + f for f in forms for p in ("", " ")))


def exact_ids(symbols: Sequence[str], table: Mapping[str, int] | None) -> list[int] | None:
    """The first-token ids of the spellings of every symbol in ``table``, or None when a symbol's own
    form is not there."""
    if not table or len(symbols) < 2:
        return None
    ids = []
    for word in symbols:
        if word not in table:
            return None
        ids += [table[s] for s in spellings(word) if s in table]
    unique = sorted(set(ids))
    return unique if len(unique) <= MAX_EXACT_TOKENS else None


def own_token_fold(fold: Fold | None, logprobs: Any, table: Mapping[str, int] | None,
                   symbols: Sequence[str]) -> Fold | None:
    """``fold``, with a token that starts several names as text but is, by the server's tokenizer, the first
    token of one name's spellings only counted for that name (the reply's ids say which token is which).

    ``closely related`` starts with the token ``c``, which also spells the start of ``completely unrelated``
    (whose own first token is ``com``); read as shared, ``c`` was nobody's and the name was read by `` closely``
    alone (log P ≈ −9). A model writes a name in its tokenizer's own pieces, so ``c`` is ``closely``'s. A token
    that is the first token of several names (``alarm`` of ``alarm_query`` / ``alarm_set``) stays shared."""
    if fold is None or not table:
        return fold
    shared = [(token, tid) for token, tid in _candidates(logprobs) if fold(token) == AMBIGUOUS]
    if not shared:  # the common case: no token to give
        return fold
    owners: dict[int, set[str]] = {}
    for name in symbols:
        for spelled in spellings(name):
            if spelled in table:
                owners.setdefault(table[spelled], set()).add(name)
    own: dict[str, str | None] = {}
    for token, tid in shared:
        names = owners.get(tid, set())
        if len(names) == 1:
            name = next(iter(names))
            own[token] = name if own.get(token, name) == name else None  # one text, two owners: shared
    kept = {t: n for t, n in own.items() if n is not None}
    return (lambda token: kept.get(token) or fold(token)) if kept else fold


def _candidates(logprobs: Any) -> list[tuple[str, int]]:
    """(token, id) of the answer token and its alternatives, where the reply gives ids (llama.cpp does)."""
    entries = field_of(logprobs, "content")
    if not entries:
        return []
    entry = answer_entry(entries, None)
    out = []
    for cand in [entry, *(field_of(entry, "top_logprobs") or field_of(entry, "top_probs") or [])]:
        token, tid = field_of(cand, "token"), field_of(cand, "id")
        if isinstance(token, str) and isinstance(tid, int) and not isinstance(tid, bool):
            out.append((token, tid))
    return out


def exact_fields(ids: Sequence[int]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(standard fields, extra_body fields) that read exactly these tokens' probabilities."""
    fields = {"temperature": 1.0, "top_p": 1.0, "seed": 0, "top_logprobs": len(ids),
              "logit_bias": {str(i): EXACT_BIAS for i in ids}}
    return fields, dict(EXACT_EXTRA)


def next_ids(group: Sequence[str], prefix_ids: tuple[int, ...] | None,
             paths: Mapping[str, tuple[int, ...]] | None) -> list[int] | None:
    """The token each name of ``group`` goes on with after ``prefix_ids`` (a continuation read exactly), or
    None where a name does not start with those very tokens or ends there (the window is read then)."""
    if not prefix_ids or not paths:
        return None
    k, out = len(prefix_ids), []
    for name in group:
        path = paths.get(name)
        if path is None or len(path) <= k or tuple(path[:k]) != prefix_ids:
            return None
        out.append(path[k])
    return sorted(set(out))


def forced(group: Sequence[str], prefix_ids: tuple[int, ...] | None, paths: Mapping[str, tuple[int, ...]] | None,
           texts: Mapping[str, tuple[str, ...]] | None) -> tuple[tuple[int, ...], str]:
    """The tokens every name of ``group`` goes on with after ``prefix_ids`` (``balance`` → ``_not_updated_after``
    for ``balance_not_updated_after_bank_transfer`` / ``_cheque_or_cash_deposit``), with their text: an exact read
    of one token is certain (the bias leaves it alone), so it is prefilled, not asked. ``((), "")`` where the
    next token already parts the names, or their texts are unknown."""
    if not prefix_ids or not texts or not group or group[0] not in texts:
        return (), ""
    spelled, ids, text = texts[group[0]], list(prefix_ids), ""
    while (nxt := next_ids(group, tuple(ids), paths)) is not None and len(nxt) == 1 and len(ids) < len(spelled):
        text += spelled[len(ids)]
        ids.append(nxt[0])
    return tuple(ids[len(prefix_ids):]), text


def is_exact(fields: Mapping[str, Any], extra: Mapping[str, Any]) -> bool:
    return "logit_bias" in fields and bool(extra.get("post_sampling_probs"))


def still_exact(exact: bool, refused: Iterable[str]) -> bool:
    """Whether a read meant to be exact still is, once the fields the server refused were dropped."""
    return exact and not EXACT_FIELDS.intersection(refused)


def window_only(fields: Mapping[str, Any], extra: Mapping[str, Any],
                top_logprobs: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The same request reading the top-k window: a continuation call reads the next token, whose
    candidates the first token's bias says nothing about."""
    if not is_exact(fields, extra):
        return dict(fields), dict(extra)
    plain = {k: v for k, v in fields.items() if k not in ("logit_bias", "seed", "top_p")}
    plain.update(temperature=0, top_logprobs=top_logprobs)
    if "max_tokens" in plain:  # a continuation reads one token, whatever the first call wrote (pathread.py)
        plain["max_tokens"] = 1
    return plain, {k: v for k, v in extra.items() if k not in EXACT_EXTRA and k != "grammar"}  # (a path's)


def as_logprobs(logprobs: Any) -> Any:
    """llama.cpp's post-sampling shape (``prob``, ``top_probs``) as the logprob shape every reader takes;
    any other object is returned as it is."""
    if not isinstance(logprobs, dict) or not isinstance(logprobs.get("content"), list):
        return logprobs
    entries = logprobs["content"]
    if not any(isinstance(e, dict) and "top_probs" in e for e in entries):
        return logprobs
    return {**logprobs, "content": [_entry(e) if isinstance(e, dict) else e for e in entries]}


def _entry(e: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in e.items() if k not in ("prob", "top_probs")}
    if "prob" in e and "logprob" not in e:
        out["logprob"] = _log(e["prob"])
    if "top_probs" in e and "top_logprobs" not in e:
        top = e["top_probs"]
        out["top_logprobs"] = ([_entry(c) if isinstance(c, dict) else c for c in top]
                               if isinstance(top, list) else top)
    return out


def _log(p: Any) -> Any:
    if isinstance(p, bool) or not isinstance(p, (int, float)):
        return p  # left for the reply's type check to refuse
    return math.log(p) if p > 0 else -math.inf


class TokenTable:
    """The first token id of answer words' spellings, by the server's own tokenizer, each asked once.

    A word's own form (and with a space first) is always kept; its other casings only where they are a
    single token: "Insect" starts with "In", the way a reply that is no answer starts too ("In the
    text..."), and biasing it would read that start as an option."""

    def __init__(self, tokenize: Callable[[str], Iterable[int]],
                 pieces: Callable[[str], Iterable[tuple[int, str]]] | None = None) -> None:
        self._tokenize = tokenize
        self._pieces = pieces
        #: spelling → its token ids (empty where it tokenises to nothing)
        self._known: dict[str, tuple[int, ...]] = {}
        #: word → its tokens' texts, where they spell it exactly (None where they do not, or are unknown)
        self._texts: dict[str, tuple[str, ...] | None] = {}

    @classmethod
    def of(cls, exact_readout: bool, tokenize: Callable[[str], Iterable[int]] | None,
           pieces: Callable[[str], Iterable[tuple[int, str]]] | None = None) -> TokenTable | None:
        """A table for a backend whose server reads tokens exactly (``Backend.exact_readout``), else None."""
        return cls(tokenize, pieces) if tokenize is not None and exact_readout else None

    def ids(self, words: Iterable[str]) -> dict[str, int] | None:
        """The kept spellings of ``words`` → their first token ids; None when the tokenizer fails."""
        out: dict[str, int] = {}
        for word in words:
            for spelled in spellings(word):
                tokens = self._tokens(spelled)
                if tokens is None:
                    return None
                if tokens and (spelled.strip() == word or len(tokens) == 1):
                    out[spelled] = tokens[0]
        return out or None

    def paths(self, words: Iterable[str]) -> dict[str, tuple[int, ...]]:
        """Each word as given → all its token ids (for reading a shared prefix on, :func:`next_ids`)."""
        out = {}
        for word in words:
            tokens = self._tokens(word)
            if tokens:
                out[word] = tokens
        return out

    def texts(self, words: Iterable[str]) -> dict[str, tuple[str, ...]]:
        """Each word as given → the texts of its tokens (those of :meth:`paths`), where the tokens spell the word
        exactly: a prefix every remaining name shares is then prefilled without a call (readon.py)."""
        out = {}
        for word in words:
            if word not in self._texts and self._pieces is not None:
                try:
                    pairs = [(int(i), str(t)) for i, t in self._pieces(word)]
                except Exception:  # noqa: BLE001 - none now (a timeout is not kept): shared tokens are read by calls
                    continue
                ids, texts = tuple(i for i, _ in pairs), tuple(t for _, t in pairs)
                self._texts[word] = texts if "".join(texts) == word and ids == self._tokens(word) else None
            found = self._texts.get(word)
            if found is not None:
                out[word] = found
        return out

    def _tokens(self, spelled: str) -> tuple[int, ...] | None:
        if spelled not in self._known:
            try:
                self._known[spelled] = tuple(int(t) for t in self._tokenize(spelled))
            except Exception:  # noqa: BLE001 - no table: the window is read, as on any server
                return None
        return self._known[spelled]
