"""A name's own first token, read exactly (exact.own_token_fold): a token that starts several names as text
but, by the server's tokenizer, is the first token of one name only counts for that name.

The case found on the 1.5B: sick's level names asked as a choice. ``closely related`` is tokenised ``c`` +
``los`` + ``ely`` …, ``completely unrelated`` ``com`` + ``pletely`` …; ``c`` spells the start of both, so it was
read as shared, given to neither (each had a token of its own), and ``closely related`` was read by
`` closely`` alone: log P ≈ −9 on every item, 0 of its 6 right. Prefilled with ``c``, the 1.5B goes on with
``los`` at P ≈ 1 (``omp`` is not among its top 8): ``c`` is ``closely``'s.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator

import httpx
import openai
import pytest

from jev_shared import Choice, SystemOneClient
from jev_shared.backend import describe
from jev_shared.exact import own_token_fold
from jev_shared.labels import AMBIGUOUS, name_fold
from jev_shared.local import LocalServer
from tests.helpers.local import started

NAMES = ["completely unrelated", "slightly related", "closely related"]
#: The 1.5B's own ids for these pieces (Qwen2.5's tokenizer).
VOCAB = {"com": 874, "pletely": 49168, " unrelated": 45205, " completely": 6587, "sl": 3226, "ightly": 71948,
         " related": 5435, " slightly": 10078, "c": 66, "los": 2301, "ely": 974, " closely": 15148,
         "I": 40, "The": 785}
PIECES = {"completely unrelated": ["com", "pletely", " unrelated"], "slightly related": ["sl", "ightly", " related"],
          "closely related": ["c", "los", "ely", " related"]}
#: The model's raw logprobs of the first tokens: ``c`` below ``com`` and ``sl`` (no read-on), far above `` closely``.
RAW = {"com": -1.0, "sl": -1.5, "c": -2.0, " completely": -8.0, " slightly": -8.5, " closely": -9.0,
       "I": -3.0, "The": -3.5}


def tokenize(text: str) -> list[int]:
    spaced = text.startswith(" ")
    word = text.strip()
    pieces = PIECES.get(word.lower())
    if pieces is None or word != word.lower():
        return [7] * len(text)  # other casings: many tokens, none kept
    if spaced:
        first = " " + word.split(" ")[0]
        return [VOCAB[first], *(VOCAB[p] for p in pieces[len(pieces) - 1:])]
    return [VOCAB[p] for p in pieces]


def reply_of(ids: list[int]) -> dict:
    tokens = {i: t for t, i in VOCAB.items()}
    z = math.log(sum(math.exp(RAW[tokens[i]]) for i in ids))
    alts = sorted(({"id": i, "token": tokens[i], "prob": math.exp(RAW[tokens[i]] - z)} for i in ids),
                  key=lambda c: -c["prob"])
    return {"content": [{**alts[0], "top_probs": alts}]}


def exact_server(seen: list[dict]) -> openai.OpenAI:
    """llama.cpp's wire shape: the biased tokens' probabilities renormalised (``top_probs``), with their ids."""

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        assert "logit_bias" in body and body.get("post_sampling_probs")
        logprobs = reply_of([int(i) for i in body["logit_bias"]])
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length", "logprobs": logprobs,
                         "message": {"role": "assistant", "content": logprobs["content"][0]["token"]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})

    sdk = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="local",
                        http_client=httpx.Client(transport=httpx.MockTransport(reply)))
    return describe(sdk, surfaces=("chat_completions",), tokenize=tokenize, exact_readout=True)


def test_a_token_that_is_one_names_own_first_token_counts_for_it() -> None:
    table = {"completely unrelated": 874, " completely unrelated": 6587, "closely related": 66,
             " closely related": 15148}
    fold = name_fold(NAMES[::2])
    assert fold("c") == AMBIGUOUS  # as text, "c" starts both
    own = own_token_fold(fold, reply_of([874, 6587, 66, 15148]), table, NAMES[::2])
    assert own is not None and own("c") == "closely related" and own("com") == "completely unrelated"
    assert own(" closely") == "closely related" and own("I") is None
    # no ids in the reply (a window, or a server that sends none): the text fold as it was
    no_ids = {"content": [{"token": "c", "logprob": -1.0, "top_logprobs": [{"token": "c", "logprob": -1.0}]}]}
    assert own_token_fold(fold, no_ids, table, NAMES[::2]) is fold
    assert own_token_fold(fold, reply_of([66]), None, NAMES[::2]) is fold


def test_a_first_token_several_names_own_stays_shared() -> None:
    """``alarm`` is the first token of both ``alarm_query`` and ``alarm_set``: read on, never given to one."""
    names = ["alarm_query", "alarm_set", "weather_query"]
    table = {"alarm_query": 1, "alarm_set": 1, "weather_query": 2}
    fold = name_fold(names)
    reply = {"content": [{"id": 1, "token": "alarm", "logprob": -0.1,
                          "top_logprobs": [{"id": 1, "token": "alarm", "logprob": -0.1},
                                           {"id": 2, "token": "weather", "logprob": -2.0}]}]}
    own = own_token_fold(fold, reply, table, names)
    assert own is fold and fold("alarm") == AMBIGUOUS


def test_the_level_name_is_read_by_its_own_first_token_in_a_decision() -> None:
    """Through the engine (fake llama.cpp): ``closely related`` gets P(c), not P( closely), and no read-on call."""
    seen: list[dict] = []
    q = {"q": Choice(instructions="How related in meaning are the two sentences?", criteria={n: n for n in NAMES})}
    client = SystemOneClient(exact_server(seen), model="some-model", api="chat_completions", calibrator=None,
                             debias=False, debug=True)
    resp = client.system_one("Sentence A: a man plays\nSentence B: a man is playing", q)
    probs = resp.answers["q"].probabilities
    assert len(seen) == 1 and str(VOCAB["c"]) in seen[0]["logit_bias"]
    z = sum(math.exp(RAW[t]) for t in ("com", "sl", "c"))  # each name's best token, renormalised
    assert probs["closely related"] == pytest.approx(math.exp(RAW["c"]) / z, rel=1e-6)
    assert probs["completely unrelated"] == pytest.approx(math.exp(RAW["com"]) / z, rel=1e-6)
    assert resp.debug["questions"]["q"]["readout"]["label_logprobs"]["closely related"] > -3


@pytest.fixture(scope="module")
def qwen15() -> Iterator[LocalServer]:
    yield from started("qwen2.5-coder-1.5b", n_parallel=1, prompt_cache=False)


@pytest.mark.live
@pytest.mark.qwen
def test_the_15b_reads_closely_related_by_its_own_first_token(qwen15: LocalServer) -> None:
    """On the embedded 1.5B: sick's five level names; ``closely related`` was read at log P ≈ −9 on every pair."""
    levels = ["completely unrelated", "slightly related", "somewhat related", "closely related", "very related"]
    assert qwen15.tokenize("closely related")[0] == qwen15.tokenize("c")[0] != qwen15.tokenize("completely")[0]
    client = SystemOneClient(qwen15.client(), model=qwen15.model, calibrator=None, debias=False, debug=True)
    q = {"q": Choice(instructions="How related in meaning are the two sentences?", criteria={n: n for n in levels})}
    resp = client.system_one("Sentence A: A man is playing a guitar\nSentence B: A man is playing an instrument", q)
    read = resp.debug["questions"]["q"]["readout"]
    assert read["source"] == "logprobs:exact" and read["label_logprobs"]["closely related"] > -6
    assert resp.answers["q"].probabilities["closely related"] > 0.005
