"""Names that share a first token get answer words whose first tokens differ (first_tokens.py, measured against the
read-on by bench/first_token_names.py), checked with a tokenizer whose first token is a name's first word."""

from __future__ import annotations

import re

from jev_shared.first_tokens import distinct_aliases
from jev_shared.labels import token_checked_aliases


def _first_word(word: str) -> str:
    """A tokenizer whose first token is the word's first word, lowercased, with the leading space kept."""
    m = re.match(r"\s*[A-Za-z0-9]+?(?=[A-Z_]|$)|\s*[A-Za-z0-9]+", word)
    return m.group(0).lower() if m else word


#: ``query`` and ``set`` repeat across scenarios, so dropping the shared first word would clash (query, set, query…)
INTENTS = ["alarm_query", "alarm_set", "alarm_remove", "calendar_query", "calendar_set", "play_music", "play_radio",
           "weather_query", "general_joke", "general_quirky"]


def test_each_name_under_a_shared_first_token_gets_a_word_of_its_own() -> None:
    assert len({_first_word(n) for n in INTENTS}) == 5
    words = distinct_aliases(INTENTS, [n.replace("_", " ") for n in INTENTS], _first_word)
    assert words is not None
    assert len({_first_word(w) for w in words}) == len(words)  # one call tells them all apart
    for name, word in zip(INTENTS, words):  # each answers by its own words, turned round where it must
        assert sorted(word.split("_")) == sorted(name.split("_"))
    assert sum(w != n for n, w in zip(INTENTS, words)) <= 5  # a name keeps its word where it can


def test_names_told_apart_already_are_left_as_they_are() -> None:
    names = ["billing", "technical", "sales"]
    assert distinct_aliases(names, names, _first_word) is None


def test_a_member_no_turn_sets_apart_keeps_its_word() -> None:
    """``alarm_query`` and ``calendar_query`` both want ``query`` first: one gets it, the other keeps its name
    (its group is read on as before), and no word is given twice."""
    names = ["alarm_set", "alarm_query", "calendar_set", "calendar_query", "query"]
    words = distinct_aliases(names, names, _first_word)
    assert words is not None and len({w.lower() for w in words}) == len(words)
    assert not any(a != b and b.lower().startswith(a.lower()) for a in words for b in words)


def test_description_words_still_come_first_where_they_tell_every_name_apart() -> None:
    names, descs = ["choice_1", "choice_2"], ["refunds and charges", "crashes and errors"]
    assert distinct_aliases(names, descs, _first_word) == token_checked_aliases(names, descs, _first_word)
