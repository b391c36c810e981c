"""A score of three levels is answered by its level names, any other by digits.

On the 1.5B, finphrasebank and poem_sentiment (3 levels) read 39 and 35 of 60 asked by their level names
against 25 and 22 by digits; sick and sst5 (5 levels) read better by digits. What goes over the wire: the
options and the closing ask name the levels, the window's level-name tokens are read back onto the levels,
and the answer keeps its shape (``ScoreAnswer``: keys ``"0"`` … ``"n-1"``, the expected level).
"""

from __future__ import annotations

import pytest

from jev_shared import Score, SystemOneClient
from jev_shared.labels import level_names, named_format
from jev_shared.questions import prepare_question
from tests.helpers.provider import provider
from tests.helpers.replies import windows

FIN = Score(instructions="How positive is this sentence from financial news?",
            criteria=["negative", "neutral", "positive"])
SST5 = Score(instructions="How positive is this movie review?",
             criteria=["very negative", "negative", "neutral", "positive", "very positive"])


def prep(q: Score):  # noqa: ANN201 - a Prepared
    return prepare_question("q", q, "logprobs")


@pytest.mark.parametrize(("criteria", "words"), [
    (["negative", "neutral", "positive"], ("negative", "neutral", "positive")),
    (["negative", "no impact", "positive"], ("negative", "no impact", "positive")),
    ({"low": "can wait a week", "mid": "this week", "high": "today"}, ("low", "mid", "high")),  # a dict: its keys
    (["not related", "somewhat related", "very related"], ("not related", "somewhat related", "very related")),
    (["low urgency", "low priority", "high"], ("urgency", "priority", "high")),  # a shared first word: what differs
    (["The review is negative about the film as a whole", "It is neither", "The review is positive"], None),
    (["1", "2", "3"], None),  # digits as names: digits
    (["low", "Low", "high"], None),  # not told apart
    (["bad", "good"], None),  # two levels: digits
    (["none", "low", "mid", "high", "top"], None),  # five: digits
])
def test_which_scores_are_answered_by_their_level_names(criteria, words) -> None:
    assert level_names(prep(Score(instructions="How?", criteria=criteria))) == words


def test_the_answer_format_is_names_for_three_levels_and_digits_otherwise() -> None:
    fmt, fold = named_format(prep(FIN))
    assert fmt.symbols == ("negative", "neutral", "positive")
    assert fold(" Negative") == "negative" and fold("2") is None
    fmt, fold = named_format(prep(SST5))
    assert fmt.symbols == ("0", "1", "2", "3", "4") and fold("2") == "2"


def _system_of(body: dict) -> str:
    return body["messages"][0]["content"]


def test_a_three_level_score_asks_and_reads_by_level_names() -> None:
    client_sdk = provider(windows({"negative": -0.2, "neutral": -2.0, "positive": -3.0, "0": -4.0}))
    client = SystemOneClient(client_sdk, model="m", method="logprobs", debias=False, calibrator=None)
    resp = client.system_one("Operating profit fell to EUR 1.2 mn.", {"fin": FIN})
    system = _system_of(client_sdk.wire[0].body)
    assert "negative: negative\nneutral: neutral\npositive: positive" in system
    assert "Answer with exactly one option name (negative, neutral, positive)." in system
    assert "digit" not in system
    answer = resp.answers["fin"]
    assert answer.type == "score" and set(answer.probabilities) == {"0", "1", "2"}
    assert answer.probabilities["0"] > 0.7 and answer.score < 0.5  # the window's "negative" is level 0
    assert answer.legend == {"0": "negative", "1": "neutral", "2": "positive"}


def test_a_five_level_score_still_asks_by_digits() -> None:
    client_sdk = provider(windows({"1": -0.2, "0": -2.0, "negative": -1.0}))
    client = SystemOneClient(client_sdk, model="m", method="logprobs", debias=False, calibrator=None)
    resp = client.system_one("A dull film.", {"sst5": SST5})
    system = _system_of(client_sdk.wire[0].body)
    assert "Answer with exactly one digit (0, 1, 2, 3, 4)." in system and "0: very negative" in system
    assert max(resp.answers["sst5"].probabilities.items(), key=lambda kv: kv[1])[0] == "1"
