"""The path read's pieces (src/jev_shared/pathread.py) and the prefilled shared tokens (exact.forced), by hand."""

from __future__ import annotations

import math

import pytest

from jev_shared.exact import EXACT_BIAS, TokenTable, forced
from jev_shared.pathread import (
    MAX_PATH_TOKENS,
    PATH_TEMPERATURE,
    path_fields,
    path_plan,
    split_path,
    window_for,
)

#: alarm_query = alarm·_query, alarm_set = alarm·_set, query = query; with spellings' first-token ids.
PATHS = {"alarm_query": (1, 11), "alarm_set": (1, 12), "query": (2,)}
FIRST = {"alarm_query": 1, " alarm_query": 101, "alarm_set": 1, " alarm_set": 101, "query": 2, " query": 102}


def test_a_plan_only_where_names_share_a_first_token_and_as_deep_as_parts_them():
    plan = path_plan(tuple(PATHS), FIRST, PATHS)
    assert plan is not None and plan.depth == 2
    assert set(plan.biased) == {1, 2, 11, 12, 101, 102} and plan.first_ids == frozenset({1, 2, 101, 102})
    assert '"alarm_query"' in plan.grammar and plan.grammar.startswith('root ::= " "?')
    assert '"Alarm_query"' not in plan.grammar  # no spelling of it is biased
    capital = path_plan(tuple(PATHS), {**FIRST, "Alarm_query": 3}, PATHS)
    assert capital is not None and '"Alarm_query"' in capital.grammar
    assert path_plan(("query", "alarm_set"), FIRST, PATHS) is None  # told apart at the first token: no path
    assert path_plan(tuple(PATHS), FIRST, {"alarm_query": (1, 11)}) is None  # a name's tokens unknown
    long = {"a": tuple(range(1, 20)), "b": (*range(1, 19), 99)}
    deep = path_plan(("a", "b"), {"a": 1, "b": 1}, long)
    assert deep is not None and deep.depth == MAX_PATH_TOKENS


def test_the_grammar_ends_each_name_where_it_parts_from_the_others():
    """With the tokens' texts, the call stops writing once the name is told apart (a name whose first token is its
    own costs one token more, not the depth); without them, the whole name."""
    paths = {"alarm_query": (1, 11, 13), "alarm_set": (1, 12), "query": (2,)}
    texts = {"alarm_query": ("alarm", "_qu", "ery"), "alarm_set": ("alarm", "_set"), "query": ("query",)}
    plan = path_plan(tuple(paths), FIRST, paths, texts)
    assert plan is not None and plan.depth == 2
    assert '"alarm_qu"' in plan.grammar and '"alarm_query"' not in plan.grammar and '"query"' in plan.grammar
    whole = path_plan(tuple(paths), FIRST, paths)
    assert whole is not None and '"alarm_query"' in whole.grammar


def test_the_path_fields_bias_every_names_tokens_and_write_the_depth():
    plan = path_plan(tuple(PATHS), FIRST, PATHS)
    assert plan is not None
    fields, extra = path_fields(plan, {"temperature": 1.0, "logprobs": True}, {"post_sampling_probs": True})
    assert fields["temperature"] == PATH_TEMPERATURE and fields["max_tokens"] == 2 and fields["logprobs"] is True
    assert fields["logit_bias"] == {str(i): EXACT_BIAS for i in plan.biased} and fields["top_logprobs"] == 6
    assert extra == {"post_sampling_probs": True, "grammar": plan.grammar}


def entry(token: str, tid: int, cands: dict[tuple[str, int], float]) -> dict:
    top = [{"token": t, "id": i, "logprob": lp} for (t, i), lp in cands.items()]
    return {"token": token, "id": tid, "logprob": cands[(token, tid)], "top_logprobs": top}


def test_the_reply_splits_into_the_first_tokens_read_and_the_windows_along_the_path_turned_back():
    plan = path_plan(tuple(PATHS), FIRST, PATHS)
    assert plan is not None
    t = PATH_TEMPERATURE
    first = entry("alarm", 1, {("alarm", 1): -0.1 / t, ("query", 2): -2.0 / t, ("_set", 12): -9.0 / t})
    second = entry("_set", 12, {("_set", 12): -0.2 / t, ("_query", 11): -1.5 / t, ("query", 2): -30.0 / t})
    logprobs, windows = split_path({"content": [first, second]}, plan)
    [head] = logprobs["content"]
    assert head["logprob"] == pytest.approx(-0.1)
    assert [(c["token"], round(c["logprob"], 9)) for c in head["top_logprobs"]] == [("alarm", -0.1), ("query", -2.0)]
    assert list(windows) == [(1,)]
    assert window_for(windows, (1,), [11, 12]) == [("_set", pytest.approx(-0.2)), ("_query", pytest.approx(-1.5))]
    assert window_for(windows, (2,), [11, 12]) is None  # the path did not go that way: a call reads it
    assert window_for(windows, (1,), None) is None
    # a token that underflowed to probability 0 is no candidate
    gone = entry("_set", 12, {("_set", 12): -0.2, ("_query", 11): -math.inf})
    assert window_for(split_path({"content": [first, gone]}, plan)[1], (1,), [11, 12]) == [("_set", pytest.approx(-0.06))]


def test_tokens_every_remaining_name_goes_on_with_are_prefilled_with_their_text():
    paths = {"top_up_failed": (5, 6, 7, 6, 8), "top_up_limits": (5, 6, 7, 6, 9)}
    texts = {"top_up_failed": ("top", "_", "up", "_", "failed"), "top_up_limits": ("top", "_", "up", "_", "limits")}
    assert forced(list(paths), (5,), paths, texts) == ((6, 7, 6), "_up_")
    assert forced(list(paths), (5, 6, 7, 6), paths, texts) == ((), "")  # the next token parts them
    assert forced(list(paths), (5,), paths, None) == ((), "")  # no texts: each token is read by a call


def test_a_words_token_texts_are_kept_only_where_they_spell_it():
    ids = {"top_up": [5, 6, 7], "odd": [3, 4]}
    pieces = {"top_up": [(5, "top"), (6, "_"), (7, "up")], "odd": [(3, "o"), (4, "")]}  # a byte piece: no text
    table = TokenTable(lambda text: ids[text], lambda text: pieces[text])
    assert table.texts(["top_up", "odd"]) == {"top_up": ("top", "_", "up")}
    assert TokenTable(lambda text: ids[text]).texts(["top_up"]) == {}  # a tokenizer without texts
    calls = []

    def slow_then_fine(text: str) -> list[tuple[int, str]]:
        calls.append(text)
        if len(calls) == 1:
            raise TimeoutError("the call's deadline")
        return pieces[text]

    flaky = TokenTable(lambda text: ids[text], slow_then_fine)
    assert flaky.texts(["top_up"]) == {} and flaky.texts(["top_up"]) == {"top_up": ("top", "_", "up")}  # not kept
