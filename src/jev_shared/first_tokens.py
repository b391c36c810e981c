"""Answer words whose first tokens differ, so one call reads every option's own probability.

A token readout reads each answer word's first token. Where several option names start with the same token in
the server's tokenizer (``card_arrival`` / ``card_linking`` both start with ``card``; ``BookHouse`` /
``BookAppointment`` with ``Book``), that token's probability is the group's, and telling the names apart takes
a read-on call per decision (:mod:`readon`). Here the names are given answer words a first token tells apart
instead: each name of a group sharing a first token answers by its own word or by its words turned round
(``linking_card``), so that no two words share a first token (a maximum matching of names to first tokens) (:func:`labels.aliases_for` already shortens names that share a first *word*;
this looks at tokens). A member that no word of its name sets apart keeps its word, and its group is read on as
before. The answers are keyed by the option names as ever: only the words the model answers with change.

Not the engine's default (the planner answers by :func:`labels.token_checked_aliases`): on the default 1.5B, on
three public intent sets of 30 items, it cut the calls per decision from 2.00 to 1.10 (sgd), 1.67 to 1.07
(powerplay11) and 2.30 to 1.30 (banking77) but answered 2-3 items fewer right in each (22 → 19, 19 → 16,
17 → 15): a name turned round (``Appointment_Book``) reads worse to the model than its own read on.
``python -m bench first_token_names``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .labels import aliases_for, token_checked_aliases, words_of

FirstToken = Callable[[str], object]


def distinct_aliases(keys: Sequence[str], descriptions: Sequence[str],
                     first_token: FirstToken) -> tuple[str, ...] | None:
    """The answer words for ``keys`` that the server's tokenizer tells apart at the first token (as written and
    after a space), where the names' own do not; None where they already do or nothing better is found."""
    checked = token_checked_aliases(keys, descriptions, first_token)
    if checked is not None:
        return checked
    base = aliases_for(keys, descriptions)
    sig: dict[str, tuple[object, object]] = {}

    def of(word: str) -> tuple[object, object]:
        if word not in sig:
            sig[word] = _signature(word, first_token)
        return sig[word]

    for w in base:
        of(w)
    if _tokens_apart(base, sig):
        return None
    grouped = sorted(i for g in _groups(base, sig) for i in g)
    words = list(base)
    for i, word in _matched(grouped, keys, base, of).items():
        words[i] = word
    _undo_clashes(words, base, of)
    return tuple(words) if tuple(words) != tuple(base) else None


def _matched(grouped: list[int], keys: Sequence[str], base: Sequence[str],
             of: Callable[[str], tuple[object, object]]) -> dict[int, str]:
    """Each grouped name's word: its own or a turn of it, at most one name a first token (a maximum matching,
    found by augmenting paths, each name trying its own word first); a name left out keeps its word."""
    fixed = [w for i, w in enumerate(base) if i not in set(grouped)]
    taken = {of(w)[0] for w in fixed} | {of(w)[1] for w in fixed}
    options = {i: [w for w in [base[i], *_candidates(keys[i])]
                   if of(w)[0] not in taken and of(w)[1] not in taken and not _prefix_clash(w, fixed)]
               for i in grouped}
    owner: dict[object, int] = {}
    choice: dict[int, str] = {}

    def place(i: int, seen: set[object]) -> bool:
        for w in options[i]:
            token = of(w)[0]
            if token in seen:
                continue
            seen.add(token)
            if token not in owner or place(owner[token], seen):
                owner[token], choice[i] = i, w
                return True
        return False

    for i in grouped:
        place(i, set())
    return choice


def _prefix_clash(word: str, others: Sequence[str]) -> bool:
    low = word.lower()
    return any(low == o.lower() or low.startswith(o.lower()) or o.lower().startswith(low) for o in others)


def _undo_clashes(words: list[str], base: Sequence[str], of: Callable[[str], tuple[object, object]]) -> None:
    """A turned word that shares its spaced first token with another word, or starts one (or is started by one),
    goes back to the name's own (its group is read on as before)."""
    for _ in range(len(words)):
        bad = next((i for i, w in enumerate(words) if w != base[i] and (
            any(of(w)[1] == of(o)[1] for j, o in enumerate(words) if j != i)
            or _prefix_clash(w, [o for j, o in enumerate(words) if j != i]))), None)
        if bad is None:
            return
        words[bad] = base[bad]


def _signature(word: str, first_token: FirstToken) -> tuple[object, object]:
    """The word's first token as written and after a space (a model answers either way)."""
    return first_token(word), first_token(" " + word)


def _tokens_apart(words: Sequence[str], sig: dict[str, tuple[object, object]]) -> bool:
    """Whether no two words share a first token in either spelling."""
    bare = [sig[w][0] for w in words]
    spaced = [sig[w][1] for w in words]
    return len(set(bare)) == len(bare) and len(set(spaced)) == len(spaced)


def _groups(words: Sequence[str], sig: dict[str, tuple[object, object]]) -> list[list[int]]:
    """Indices of words sharing a first token in either spelling (joined where the groups overlap)."""
    parent = list(range(len(words)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for part in (0, 1):
        seen: dict[object, int] = {}
        for i, w in enumerate(words):
            token = sig[w][part]
            if token in seen:
                parent[root(i)] = root(seen[token])
            else:
                seen[token] = i
    groups: dict[int, list[int]] = {}
    for i in range(len(words)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _candidates(name: str) -> list[str]:
    """The name's words turned round, each later word first in turn (``card_not_working`` → ``not_working_card``,
    then ``working_card_not``): every word kept, so nothing it says is lost (dropping words once turned
    ``card_not_working`` into ``working``)."""
    words = words_of(name)
    turns = ["_".join(words[k:] + words[:k]) for k in range(1, len(words))]
    return [c for c in dict.fromkeys(turns) if c[:1].isalpha()]
