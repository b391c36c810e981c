"""Readout: folding, missing labels, no signal, provider faults, JSON readouts, and properties."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jev_shared import LabelReadoutError, MalformedAnswerError
from jev_shared.answers import build_answer, peak_confidence
from jev_shared.json_readout import parse_object, read_discrete, read_ratings, read_structured, strip_think
from jev_shared.labels import AmbiguousNamesError, digit_fold, fold_label, name_fold, names_collide, yes_no_fold
from jev_shared.questions import Choice, prepare_question
from jev_shared.readout import read_labels
from tests.helpers.replies import chat_logprobs as window

ABC = ("A", "B", "C")


@pytest.mark.parametrize(("token", "label"), [("B", "B"), (" B", "B"), ("b", "B"), ("B.", "B"), ("(B)", "B"),
                                              ("\nC", "C"), ("Be", None), ("D", None), ("ı", None), ("", None)])
def test_letter_folding(token, label):
    assert fold_label(token, frozenset(ABC)) == label


def test_best_variant_wins_and_softmax_is_over_labels_only():
    ro = read_labels(window([("The", -0.1), (" B", -1.0), ("b", -0.5), ("A", -2.0), ("C", -3.0)]), ABC)
    assert ro.sampled == "The"
    weights = [math.exp(-2.0), math.exp(-0.5), math.exp(-3.0)]
    assert ro.probs == pytest.approx([w / sum(weights) for w in weights])


def test_a_label_outside_the_window_gets_zero_and_is_listed():
    ro = read_labels(window([("A", -0.2), ("B", -1.7), ("x", -4.0)]), ABC)
    assert ro.probs[2] == 0.0 and ro.labels_missing == ["C"] and not ro.truncated


def test_missing_floor_uses_the_lowest_returned_logprob_and_flags_truncated():
    ro = read_labels(window([("A", -0.2), ("B", -1.7), ("x", -4.0)]), ABC, missing="floor")
    assert ro.truncated and ro.labels_missing == ["C"]
    weights = [math.exp(-0.2), math.exp(-1.7), math.exp(-4.0)]
    assert ro.probs == pytest.approx([w / sum(weights) for w in weights])


def test_no_label_in_the_window_is_uniform_with_no_signal():
    ro = read_labels(window([("The", -0.1), ("Sure", -1.0)]), ABC)
    assert ro.no_signal and ro.probs == pytest.approx([1 / 3] * 3)
    prep = prepare_question("q", Choice(instructions="x", criteria={"a": "", "b": "", "c": ""}), "logprobs")
    answer = build_answer(prep, ro.probs)
    assert answer.confidence == 0.0 and answer.choice == "a"


@pytest.mark.parametrize("logprobs", [None, {"content": None}, {"content": []}])
def test_no_logprobs_at_all_is_an_error_never_an_answer(logprobs):
    with pytest.raises(LabelReadoutError, match="structured") as info:
        read_labels(logprobs, ABC)
    assert info.value.provider_cannot


def test_only_the_sampled_token_is_not_a_distribution():
    with pytest.raises(LabelReadoutError, match="nothing but the sampled token") as info:
        read_labels(window([("A", -0.1)]), ABC)
    assert info.value.provider_cannot


def test_a_single_option_is_certain_whatever_the_window():
    assert read_labels(window([("A", -3.0)]), ("A",)).probs == [1.0]


def test_null_logprobs():
    ro = read_labels(window([("A", -0.1), ("B", None), ("C", -2.0)]), ABC)  # a null alternative is 0
    assert ro.probs[1] == 0.0 and ro.probs[0] > ro.probs[2] > 0
    with pytest.raises(LabelReadoutError, match="no logprob for the answer token"):
        read_labels(window([("A", -0.1), ("B", -1.0)], sampled=("A", None)), ABC)


def test_openai_minus_9999_underflows_to_zero():
    ro = read_labels(window([("A", -0.3), ("B", -9999.0), ("C", -1.6)]), ABC)
    assert ro.probs[1] == 0.0 and sum(ro.probs) == pytest.approx(1.0)


def test_non_finite_logprob_is_refused():
    with pytest.raises(LabelReadoutError, match="non-finite"):
        read_labels(window([("A", -0.3), ("B", float("nan"))]), ABC)


def test_reasoning_tokens_are_skipped_by_matching_the_answer_tail():
    lp = {"content": [
        {"token": "<think>", "logprob": -0.1, "top_logprobs": [{"token": "<think>", "logprob": -0.1}]},
        {"token": "hmm", "logprob": -0.1, "top_logprobs": [{"token": "hmm", "logprob": -0.1}, {"token": "A", "logprob": -0.2}]},
        {"token": "B", "logprob": -0.3, "top_logprobs": [{"token": "B", "logprob": -0.3}, {"token": "A", "logprob": -1.5}]},
    ]}
    ro = read_labels(lp, ABC, content="B")
    assert ro.sampled == "B" and ro.probs[1] > ro.probs[0]


def test_name_digit_and_yes_no_folds():
    fold = name_fold(["billing", "technical", "sales"])
    assert [fold(t) for t in (" bill", "Tech", "s", "SALES.", "x")] == ["billing", "technical", "sales", "sales", None]
    assert digit_fold(4)("3") == "3" and digit_fold(4)("10") is None and digit_fold(4)("1.") is None
    assert [yes_no_fold(t) for t in (" Yes", "yep!", "N", "nope", "maybe")] == ["yes", "yes", "no", "no", None]
    assert names_collide(["card arrival", "card linking"]) and names_collide(["bill", "billing"])
    assert not names_collide(["billing", "technical"])


def test_an_ambiguous_first_token_that_outranks_every_name_is_refused():
    fold = name_fold(["billing", "bills"])
    with pytest.raises(AmbiguousNamesError):
        read_labels(window([("bill", -0.1), ("x", -2.0)]), ("billing", "bills"), fold=fold)


# --- JSON readouts ------------------------------------------------------------------------------


def test_parse_object_finds_json_in_prose_and_refuses_non_objects():
    assert parse_object('Sure! ```json\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(MalformedAnswerError):
        parse_object("[1, 2]")
    with pytest.raises(MalformedAnswerError, match="no JSON object"):
        parse_object("no json here")


def test_think_blocks_are_stripped():
    assert strip_think('<think>{"x": 1}</think>{"a": 2}') == '{"a": 2}'
    assert strip_think('reasoning without an opening tag</think> {"a": 2}') == '{"a": 2}'


def test_structured_normalises_and_keeps_the_models_numbers():
    ro = read_structured(["a", "b"], "choice", {"probabilities": {"a": 3.0, "b": 1.0}})
    assert ro.probs == pytest.approx([0.75, 0.25])
    assert ro.original == {"a": 3.0, "b": 1.0} and ro.probability_error == pytest.approx(3.0)
    assert read_structured(["a", "b"], "choice", {"probabilities": {"a": 0, "b": 0}}).probs == [0.5, 0.5]
    big = read_structured(["a", "b", "c"], "choice", {"probabilities": {"a": 1e308, "b": 1e308, "c": 1e308}})
    assert big.probs == pytest.approx([1 / 3] * 3)
    assert read_structured(["true", "false"], "noul", {"noul": 0.25}).probs == [0.25, 0.75]


@pytest.mark.parametrize("obj", [
    {"probabilities": {"a": 1.0}},
    {"probabilities": {"a": 0.5, "b": 0.5, "c": 0.0}},
    {"probabilities": {"a": True, "b": 0.5}},
    {"probabilities": {"a": -0.1, "b": 1.1}},
    {"probabilities": {"a": 0.5, "b": 0.5}, "choice": "a"},
    {"probabilities": [0.5, 0.5]},
])
def test_structured_refuses_the_wrong_shape(obj):
    with pytest.raises(MalformedAnswerError):
        read_structured(["a", "b"], "choice", obj)


def test_discrete_rules():
    keys, labels = ["a", "billing"], ["A", "B"]
    assert read_discrete(keys, labels, "choice", {"choice": "a"}).probs == [1.0, 0.0]  # exact key beats label
    assert read_discrete(keys, labels, "choice", {"choice": "b"}).probs == [0.0, 1.0]  # label, any case
    assert read_discrete(["x", "y", "z"], ["A", "B", "C"], "score", {"score": "2.000"}).probs == [0, 0, 1.0]
    assert read_discrete(["x", "y"], ["A", "B"], "noul", {"noul": "false"}).probs == [0.0, 1.0]
    for bad in ({"score": True}, {"score": "2.0000000000000000000001"}, {"score": 5}, {"score": 1.5}):
        with pytest.raises(MalformedAnswerError):
            read_discrete(["x", "y", "z"], ["A", "B", "C"], "score", bad)
    with pytest.raises(MalformedAnswerError):
        read_discrete(keys, labels, "choice", {"choice": "sales"})


def test_ratings_normalise_and_all_zero_is_uniform():
    assert read_ratings(["a", "b"], {"a": 8, "b": 2}).probs == pytest.approx([0.8, 0.2])
    assert read_ratings(["true", "false"], {"true": 0, "false": 0}).probs == [0.5, 0.5]
    for bad in ({"a": 11, "b": 0}, {"a": 2.5, "b": 0}, {"a": 1}, {"a": "8", "b": 2}):
        with pytest.raises(MalformedAnswerError):
            read_ratings(["a", "b"], bad)


# --- properties -----------------------------------------------------------------------------------

tokens = st.sampled_from(["A", " B", "b", "C.", "D", "The", " ", "yes", "(A)", "e", "Z"])
logprob = st.one_of(st.floats(min_value=-50, max_value=0), st.just(-9999.0), st.none())


@given(st.lists(st.tuples(tokens, logprob), min_size=2, max_size=20), st.integers(min_value=2, max_value=5),
       st.sampled_from(["zero", "floor"]))
def test_any_window_reads_as_a_distribution(pairs, n, missing):
    labels = tuple("ABCDE"[:n])
    first = next((p for p in pairs if p[1] is not None), ("A", -1.0))
    try:
        ro = read_labels(window(pairs, sampled=first), labels, missing=missing)
    except LabelReadoutError as exc:
        assert exc.provider_cannot  # only "nothing but the sampled token" may refuse here
        return
    assert len(ro.probs) == n
    assert sum(ro.probs) == pytest.approx(1.0)
    assert all(0.0 <= p <= 1.0 for p in ro.probs)
    prep = prepare_question("q", Choice(instructions="x", criteria={k: "" for k in "vwxyz"[:n]}), "logprobs")
    answer = build_answer(prep, ro.probs)
    assert answer.probabilities[answer.choice] == max(answer.probabilities.values())
    assert answer.probabilities[answer.choice] == pytest.approx(max(ro.probs))
    assert 0.0 <= answer.confidence <= 1.0
    assert 0.0 <= peak_confidence(ro.probs) <= 1.0
