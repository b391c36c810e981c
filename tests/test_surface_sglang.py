"""The SGLang surface (api="sglang", src/jev_shared/surface_sglang.py) against a stub of SGLang's documented wire.

No GPU server can run here, so tests/helpers/served.py speaks SGLang's wire on a loopback socket
(``/tokenize``; ``/v1/chat/completions`` with ``logit_bias`` added to the logits before the returned
log-probabilities, ``top_logprobs`` above 20; ``/v1/score``). ``bench/gpu_check.sh`` runs the same surface
against a real SGLang.
"""

from __future__ import annotations

import math
from typing import Any

import openai
import pytest

from jev_shared import Choice, Noul, Score, SystemOneClient
from jev_shared.backend import Backend, describe
from jev_shared.errors import ClientCapabilityError
from jev_shared.exact import EXACT_BIAS, EXACT_SOURCE
from jev_shared.served import attach, for_server, server_tokenizer
from jev_shared.surfaces.sglang import exact_request
from tests.helpers.served import WORDS, FakeModel, ServedStub, served_client


def client_for(srv: ServedStub, *, exact: bool = True) -> SystemOneClient:
    return served_client(srv, "sglang", exact=exact)


def decide(srv: ServedStub, question: dict, *, exact: bool = True) -> Any:
    return client_for(srv, exact=exact).system_one("pick forty", question)


def test_a_64_option_question_reads_every_options_probability_through_logit_bias():
    model = FakeModel(WORDS, "opt40")
    question = {"q": Choice(instructions="Which option?", criteria={w: f"option {w}" for w in WORDS})}
    with ServedStub("sglang", model) as srv:
        resp = decide(srv, question)
        # what SGLang's own scoring endpoint says of the same tokens (the stub's /v1/score)
        ids = [model.vocab[w] for w in WORDS]
        score = openai.OpenAI(base_url=srv.base_url, api_key="k").post(
            "/score", body={"query": "pick forty", "items": [""], "label_token_ids": ids, "apply_softmax": True},
            cast_to=object)
    readout = resp.debug["questions"]["q"]["readout"]
    assert readout["source"] == EXACT_SOURCE and readout["labels_missing"] == [] and not readout["truncated"]
    probs = resp.answers["q"].probabilities
    assert resp.answers["q"].choice == "opt40" and all(p > 0 for p in probs.values())
    want = model.label_probs(WORDS)
    for w, scored in zip(WORDS, score["scores"][0]):  # every option, none floored, as /v1/score has it
        assert probs[w] == pytest.approx(want[w], rel=1e-6) == pytest.approx(scored, rel=1e-6)
    body = srv.seen[0]
    assert body["logit_bias"] == {str(i): EXACT_BIAS for i in sorted(ids + [model.vocab[" " + w] for w in WORDS])}
    assert body["top_logprobs"] == 128 and body["logprobs"] is True and body["temperature"] == 0
    for llama_only in ("post_sampling_probs", "top_k", "min_p", "seed"):
        assert llama_only not in body
    assert resp.usage.n_calls == 1


def test_a_server_that_refuses_logit_bias_is_read_on_the_window_and_debug_says_which():
    model = FakeModel(WORDS, "opt40")
    question = {"q": Choice(instructions="Which option?", criteria={w: f"option {w}" for w in WORDS})}
    with ServedStub("sglang", model, refuse="logit_bias") as srv:
        resp = decide(srv, question)
    readout = resp.debug["questions"]["q"]["readout"]
    assert readout["source"] == "logprobs"  # the window (as wide as the labels' tokens: SGLang takes 128)
    assert resp.debug["retry_reasons"]["q"] == ["the server refuses 'logit_bias'; re-asked without it"]
    assert "logit_bias" in srv.seen[0] and "logit_bias" not in srv.seen[1] and srv.seen[1]["top_logprobs"] == 128
    assert resp.answers["q"].choice == "opt40"


def test_score_and_noul_questions_read_exactly():
    levels = [str(d) for d in range(5)]
    model = FakeModel([*levels, "yes", "no"], "1")
    with ServedStub("sglang", model) as srv:
        resp = decide(srv, {"s": Score(instructions="How urgent?", criteria=["none", "low", "mid", "high", "top"])})
    assert resp.debug["questions"]["s"]["readout"]["source"] == EXACT_SOURCE
    probs = resp.answers["s"].probabilities
    want = model.label_probs(levels)
    assert [probs[d] for d in levels] == pytest.approx([want[d] for d in levels], rel=1e-6)
    assert {str(model.vocab[d]) for d in levels} <= set(srv.seen[0]["logit_bias"])

    model = FakeModel(["yes", "no"], "yes")
    with ServedStub("sglang", model) as srv:
        resp = decide(srv, {"n": Noul(instructions="Is it spam?")})
    assert resp.debug["questions"]["n"]["readout"]["source"] == EXACT_SOURCE
    yes, no = (math.exp(model.lps[model.vocab[w]]) for w in ("yes", "no"))
    assert resp.answers["n"].noul == pytest.approx(yes / (yes + no), rel=1e-6)


def test_the_request_translation_and_the_tokenizer():
    fields = {"temperature": 1.0, "top_p": 1.0, "seed": 0, "top_logprobs": 2, "logprobs": True,
              "logit_bias": {"7": 100, "3": 100}}
    extra = {"post_sampling_probs": True, "top_k": 0, "min_p": 0.0}
    assert exact_request(fields, extra) == ({"temperature": 0, "top_p": 1.0, "top_logprobs": 2, "logprobs": True,
                                             "logit_bias": {"7": 100, "3": 100}}, {})
    window = {"temperature": 0, "logprobs": True, "top_logprobs": 20}
    assert exact_request(window, {"x": 1}) == (window, {"x": 1})
    model = FakeModel(["yes"], "yes")
    with ServedStub("sglang", model) as srv:
        tokenize = server_tokenizer(openai.OpenAI(base_url=srv.base_url, api_key="k"))
        assert tokenize("yes") == [model.vocab["yes"]] and tokenize("ab") == [5000 + ord("a"), 5000 + ord("b")]
    assert srv.log[0].path == "/tokenize" and srv.log[0].body == {"prompt": "yes", "add_special_tokens": False}
    with pytest.raises(ClientCapabilityError, match="tokenize"):
        server_tokenizer(object())
    with pytest.raises(ClientCapabilityError, match="served engine"):
        for_server(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k"), "chat_completions")
    # what the engine does with api="sglang": an SDK client gets the server's tokenizer, a tokenizer of the
    # caller's own is kept, another api or a client without post()/base_url is left as it is (the window)
    sdk = attach(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k"), "sglang")
    got = Backend.of(sdk)
    assert got.surfaces == ("sglang",) and got.exact_readout is True and callable(got.tokenize)
    own = describe(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k"), tokenize=len)
    assert Backend.of(attach(own, "sglang")).tokenize is len and not Backend.of(own).exact_readout
    assert Backend.of(attach(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k"),
                             "chat_completions")).tokenize is None
    assert attach(object, "sglang") is object
