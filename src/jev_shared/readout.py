"""Readout: a provider's token window → a distribution over a question's labels.

Works on plain dicts (the transport normalises SDK objects), so it is pure and easy to test.
The folds that map tokens to labels are in :mod:`labels`; JSON answers are read in :mod:`json_readout`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import LabelReadoutError
from .labels import AMBIGUOUS, AmbiguousNamesError, Fold, letter_fold, names_starting

Missing = Literal["zero", "floor"]


#: A prior below this is treated as this: dividing by a near-zero share would crown a label the
#: model never names.
PRIOR_FLOOR = 1e-3
#: Nor is a prior below this share of uniform (0.3/n: 0.15 for a yes/no) divided by in full: an empty
#: state may have a real answer ("an empty message is not spam": P(yes) 0.002), and dividing by it
#: read the README's refund request as spam 0.69. A lean stronger than that is the answer, not a lean.
#: Measured on the public sets: no kind loses accuracy by it.
PRIOR_SHARE = 0.3
#: A logprob above this (a probability above 1, past rounding: exp(0.001) = 1.001) is a provider's fault: read
#: relative to the others it was a distribution (yes +5, no +1 read as P(yes) 0.98), and a gate opened on it.
LOGPROB_SLACK = 1e-3


@dataclass
class Readout:
    probs: list[float]
    labels_missing: list[str] = field(default_factory=list)
    no_signal: bool = False
    truncated: bool = False
    sampled: str | None = None
    logprobs: dict[str, float] = field(default_factory=dict)
    source: str = "logprobs"
    #: Tokens several names share that were not read on: their id where the reply gave one, and the names
    #: an exact read gave an even share of them (names no token of their own was read for). Read on if one
    #: of those names leads the answer (readon.py).
    unread: dict[str, tuple[int | None, tuple[str, ...]]] = field(default_factory=dict)

    def debug(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "sampled": self.sampled,
            "label_logprobs": self.logprobs,
            "labels_missing": self.labels_missing,
            "no_signal": self.no_signal,
            "truncated": self.truncated,
        }


def field_of(obj: Any, name: str, default: Any = None) -> Any:
    """``obj[name]`` of a reply's dict (any Mapping), else its attribute: the one dict-or-attribute reader of the
    readouts (readout, exact, continuation), so an SDK object and the lean wire path's dicts read alike."""
    if type(obj) is dict:  # the lean wire path's replies: skip the ABC check, read ~20 times a reply
        return obj.get(name, default)
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def answer_entry(entries: Sequence[Any], content: str | None) -> Any:
    """The logprob entry of the answer's first token.

    Reasoning servers report logprobs for the thinking span too; when the token stream ends
    exactly with ``content``, the answer starts where that tail does. Otherwise the stream is read
    as it arrives. Leading whitespace tokens are skipped when a later token exists.
    """
    tokens = [str(field_of(e, "token") or "") for e in entries]
    start = 0
    if content and "".join(tokens) != content:
        tail = ""
        for i in range(len(tokens) - 1, -1, -1):
            tail = tokens[i] + tail
            if tail == content:
                start = i
                break
    for e, tok in zip(entries[start:], tokens[start:]):
        if tok.strip():
            return e
    return entries[start]


def read_labels(
    logprobs: Any,
    labels: Sequence[str],
    *,
    content: str | None = None,
    missing: Missing = "zero",
    method: str = "logprobs",
    fold: Fold | None = None,
    split: bool = False,
) -> Readout:
    """Fold the window onto ``labels``, keep the best variant of each, softmax over labels only.

    ``fold`` maps a token to a label (default: letter folding); a token it calls AMBIGUOUS and that
    outranks every label raises :class:`AmbiguousNamesError`, so the caller can re-ask with letters.
    ``split`` (an exact read, where every label's first token is in the reply): a name read by no token
    of its own gets its share of a token it shares with others (:func:`split_shared`), never the floor.
    """
    fold = fold or letter_fold(labels)
    entries = field_of(logprobs, "content") if logprobs is not None else None
    if not entries:
        raise LabelReadoutError(
            f"no logprobs returned for the answer token (method={method!r}); this provider cannot report "
            "a token distribution here: use method='structured' or method='discrete'",
            provider_cannot=True,
        )
    entry = answer_entry(entries, content)
    sampled = str(field_of(entry, "token") or "")
    sampled_lp = field_of(entry, "logprob")
    window = list(field_of(entry, "top_logprobs") or [])
    if len(labels) == 1:
        return Readout([1.0], sampled=sampled, logprobs={labels[0]: 0.0})
    if sampled_lp is None:
        raise LabelReadoutError(f"no logprob for the answer token {sampled!r} (method={method!r})")
    if not any(str(field_of(c, "token")) != sampled or field_of(c, "logprob") != sampled_lp for c in window):
        raise LabelReadoutError(
            f"the answer token's top_logprobs held nothing but the sampled token (method={method!r}); one "
            "logprob is not a distribution: raise top_logprobs, or use method='structured' or 'discrete'",
            provider_cannot=True,
        )

    best, returned, shared = _fold_window([{"token": sampled, "logprob": sampled_lp, "id": field_of(entry, "id")}, *window],
                                         fold)
    own = best
    if split:
        best = split_shared(labels, best, shared)
    if not best:
        return Readout([1.0 / len(labels)] * len(labels), list(labels), True, False, sampled, {}, method)
    ro = softmax_labels(labels, best, returned, missing, sampled, method)
    if split:
        ro.unread = unread(labels, own, shared, {t: _token_id([entry, *window], t) for t in shared})
    return ro


def unread(labels: Sequence[str], own: Mapping[str, float], shared: Mapping[str, float],
           ids: Mapping[str, int | None]) -> dict[str, tuple[int | None, tuple[str, ...]]]:
    """Each shared token → (its id, the names :func:`split_shared` gave a share of it: no token of their own)."""
    return {t: (ids.get(t), tuple(n for n in names_starting(t, labels) if n not in own)) for t in shared}


def _token_id(candidates: Sequence[Any], token: str) -> int | None:
    """The id a reply gave ``token`` (llama.cpp sends one with each candidate), or None."""
    for cand in candidates:
        tid = field_of(cand, "id")
        if str(field_of(cand, "token") or "") == token and isinstance(tid, int) and not isinstance(tid, bool):
            return tid
    return None


def _fold_window(candidates: list[Any], fold: Fold) -> tuple[dict[str, float], list[float], dict[str, float]]:
    """(the best logprob of each label, every logprob returned, each token that starts several names →
    its best logprob); an ambiguous first token that outranks every label raises."""
    best: dict[str, float] = {}
    shared: dict[str, float] = {}
    ambiguous, ambiguous_token, ambiguous_id = -math.inf, "", None
    returned: list[float] = []
    for cand in candidates:
        if type(cand) is dict:  # the lean wire path's replies: read ~20 times a reply
            lp, raw = cand.get("logprob"), cand.get("token")
        else:
            lp, raw = field_of(cand, "logprob"), field_of(cand, "token")
        if lp is None:  # a null alternative is simply not reported
            continue
        lp = float(lp)
        if lp != lp or lp == math.inf:  # NaN, +inf
            raise LabelReadoutError(f"non-finite logprob {lp!r} for token {raw!r}")
        if lp > LOGPROB_SLACK:  # a probability above 1: softmax would read it as a sure answer
            raise LabelReadoutError(f"logprob {lp!r} above 0 for token {raw!r}: the provider's fault (a probability "
                                    "above 1), not a distribution")
        returned.append(lp)
        token = raw if type(raw) is str else str(raw or "")
        label = fold(token)
        if label == AMBIGUOUS:
            shared[token] = max(lp, shared.get(token, -math.inf))
            if lp > ambiguous:
                ambiguous, ambiguous_token, ambiguous_id = lp, token, field_of(cand, "id")
        elif label is not None and (label not in best or lp > best[label]):
            best[label] = lp  # -inf included: a label reported at -inf is a reported zero, not a missing one
    if ambiguous > max(best.values(), default=-math.inf):
        raise AmbiguousNamesError(
            f"the most likely first token {ambiguous_token!r} starts more than one option name",
            token=ambiguous_token, logprob=ambiguous, best=best, returned=returned, shared=shared,
            token_id=ambiguous_id if isinstance(ambiguous_id, int) and not isinstance(ambiguous_id, bool) else None,
            shared_ids={t: _token_id(candidates, t) for t in shared})
    return best, returned, shared


def split_shared(labels: Sequence[str], best: dict[str, float], shared: dict[str, float]) -> dict[str, float]:
    """``best``, with each name no token of its own was read for given an even share of the likeliest
    token that starts it and other names: P(token) / k over the k names it starts. Not read on (that is
    the continuation call's job, for the token that leads), but not floored either."""
    out = dict(best)
    for token, lp in shared.items():
        group = names_starting(token, labels)
        for name in group:
            share = lp - math.log(len(group))
            if name not in best and share > out.get(name, -math.inf):
                out[name] = share
    return out


def softmax_labels(labels: Sequence[str], best: dict[str, float], returned: list[float], missing: Missing,
                   sampled: str, method: str) -> Readout:
    """Softmax over the labels only; a label outside the window is 0, or floored at the lowest logprob."""
    missing_labels = [lab for lab in labels if lab not in best]
    truncated = False
    lps = dict(best)
    if missing_labels and missing == "floor":
        finite = [lp for lp in returned if math.isfinite(lp)]
        for lab in missing_labels:
            lps[lab] = min(finite) if finite else -math.inf
        truncated = True
    top = max(lps.values())
    if top == -math.inf:
        return Readout([1.0 / len(labels)] * len(labels), list(labels), True, truncated, sampled, best, method)
    weights = [math.exp(lps[lab] - top) if lab in lps else 0.0 for lab in labels]
    total = sum(weights)
    return Readout([w / total for w in weights], missing_labels, False, truncated, sampled, best, method)


def humble(probs: Sequence[float], trust: float) -> list[float]:
    """A fallback read mixed with uniform, so its peak confidence, (n·p − 1)/(n − 1), never exceeds ``trust``."""
    n = len(probs)
    return [trust * p + (1.0 - trust) / n for p in probs] if n > 1 else list(probs)


def divide_prior(probs: Sequence[float], prior: Sequence[float]) -> list[float]:
    """Content-free calibration: divide by what the model answers to an empty state, renormalise.

    A small model's label distribution leans to some options whatever the state (the first one
    listed, a common word); the lean is measured on states that carry nothing and divided out.
    """
    floor = max(PRIOR_FLOOR, PRIOR_SHARE / max(len(prior), 1))
    scaled = [p / max(r, floor) for p, r in zip(probs, prior)]
    total = sum(scaled)
    return [x / total for x in scaled] if total > 0 else list(probs)
