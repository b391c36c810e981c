"""Exact readout (src/jev_shared/exact.py): on a server that reads the labels' own tokens (llama.cpp, marked by
LocalServer), no option falls outside a top-20 window, whatever the number of options.

The fake server here is llama.cpp's wire shape over the real openai SDK (``httpx.MockTransport``): a model
with a fixed distribution over a vocabulary; without ``logit_bias`` + ``post_sampling_probs`` it answers the
top-k window of raw logprobs, with them the biased tokens' probabilities renormalised (``top_probs``).
"""

from __future__ import annotations

import json
import math

import httpx
import openai
import pytest

from jev_shared import Choice, Memory, SystemOneClient
from jev_shared.backend import describe
from jev_shared.exact import EXACT_SOURCE, TokenTable, as_logprobs, exact_ids, window_only
from jev_shared.methods import MethodConfig, request_fields
from jev_shared.pathread import PATH_TEMPERATURE
from jev_shared.questions import prepare_questions

WORDS = [f"opt{i:02d}" for i in range(64)]  # 64 options, each its own first token in the fake vocabulary
JUNK = ["I", "The", "In", "A", "This", "Sure", "Here", "Answer"]  # how a reply that is no answer starts
#: No short aliases for these ("query" would clash): the names themselves are read, "alarm" read on.
SHARED = {"alarm_query": "query an alarm", "alarm_set": "set an alarm", "query": "a search query"}


def vocabulary(names: list[str]) -> dict[str, int]:
    """Token text → id: each name's first piece (up to ``_``), a space-led twin, and the junk starts."""
    pieces = dict.fromkeys([n.split("_")[0] for n in names] + [" " + n.split("_")[0] for n in names] + JUNK
                           + ["_query", "_set"])
    return {t: i + 1000 for i, t in enumerate(pieces)}


def fake_model(names: list[str], favourite: str) -> tuple[dict[int, str], dict[int, float]]:
    """(id → token, id → logprob): junk first, then ``favourite``, then the names falling off one by one."""
    vocab = vocabulary(names)
    scores = {t: -1.0 for t in JUNK}
    for i, n in enumerate(names):
        first = n.split("_")[0]
        scores[first] = max(scores.get(first, -99.0), 0.0 if n == favourite else -2.0 - 0.1 * i)
        scores[" " + first] = scores[first] - 5.0
    scores["_query"], scores["_set"] = -3.0, -0.5
    z = math.log(sum(math.exp(s) for s in scores.values()))
    return {i: t for t, i in vocab.items()}, {vocab[t]: s - z for t, s in scores.items()}


def tokenizer(names: list[str]):
    vocab = vocabulary(names)

    def tokenize(text: str) -> list[int]:
        head, _, rest = text.partition("_")
        ids = [vocab[head]] if head in vocab else [7] * max(len(head), 1)  # unknown casings: several tokens
        return ids + ([vocab["_" + rest]] if rest and "_" + rest in vocab else [])

    return tokenize


#: The fake model's next token once it wrote "alarm": "_set" far ahead of "_query", anything else nowhere.
AFTER_ALARM = {"_set": -0.5, "_query": -3.0}


def server(names: list[str], favourite: str, seen: list[dict], with_ids: bool = True,
           path_first: str | None = None) -> openai.OpenAI:
    """llama.cpp's wire: with ``logit_bias`` + ``post_sampling_probs`` the biased tokens' probabilities at the
    request's temperature, one entry per token written (``max_tokens``); the path takes the likeliest token, or
    ``path_first`` first (a sampled path that left the leader)."""
    tokens, lps = fake_model(names, favourite)
    vocab = vocabulary(names)

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        k = body.get("top_logprobs", 0)
        if "logit_bias" in body and body.get("post_sampling_probs"):
            ids, temp = [int(i) for i in body["logit_bias"]], body.get("temperature", 1.0)
            entries, scores = [], lps
            for written in range(body.get("max_tokens", 1)):
                z = math.log(sum(math.exp(scores[i] / temp) for i in ids))
                top = sorted(((i, math.exp(scores[i] / temp - z)) for i in ids), key=lambda t: -t[1])[:k]
                alts = [{"id": i if with_ids else None, "token": tokens[i], "prob": p} for i, p in top]
                chosen = next((a for a in alts if a["token"] == path_first), alts[0]) if written == 0 else alts[0]
                entries.append({**chosen, "top_probs": alts})
                scores = {i: AFTER_ALARM.get(t, -20.0) for t, i in vocab.items()}
            entry = entries[0]
        else:
            if body["messages"][-1]["role"] == "assistant":  # a continuation: "alarm" read on
                window = [("_set", -0.3), ("_query", -1.4), ("s", -5.0)]
            else:
                window = sorted(((tokens[i], lp) for i, lp in lps.items()), key=lambda t: -t[1])[:k]
            alts = [{"token": t, "logprob": lp} for t, lp in window]
            entry = {"token": window[0][0], "logprob": window[0][1], "top_logprobs": alts}
            entries = [entry]
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length", "logprobs": {"content": entries},
                         "message": {"role": "assistant", "content": "".join(e["token"] for e in entries)}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})

    sdk = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="local",
                        http_client=httpx.Client(transport=httpx.MockTransport(reply)))
    describe(sdk, surfaces=("chat_completions",), tokenize=tokenizer(names))
    return sdk


def client_for(sdk: openai.OpenAI) -> SystemOneClient:
    return SystemOneClient(sdk, model="some-model", api="chat_completions", calibrator=None, debias=False, debug=True)


def test_a_64_option_question_reads_every_options_probability_on_a_server_that_allows_it():
    names = WORDS
    question = {"q": Choice(instructions="Which option?", criteria={n: f"option {n}" for n in names})}
    seen: list[dict] = []
    sdk = server(names, "opt40", seen)
    describe(sdk, exact_readout=True)  # what LocalServer.mark says of llama.cpp
    resp = client_for(sdk).system_one("pick forty", question)
    probs = resp.answers["q"].probabilities
    readout = resp.debug["questions"]["q"]["readout"]
    assert readout["source"] == EXACT_SOURCE and readout["labels_missing"] == [] and not readout["truncated"]
    assert resp.answers["q"].choice == "opt40" and all(p > 0 for p in probs.values())
    # the model's own distribution over the names, renormalised: every option, exactly
    _, lps = fake_model(names, "opt40")
    vocab = vocabulary(names)
    z = sum(math.exp(lps[vocab[n]]) for n in names)
    for n in names:
        assert probs[n] == pytest.approx(math.exp(lps[vocab[n]]) / z, rel=1e-6)
    body = seen[0]
    assert body["top_logprobs"] == 128 and len(body["logit_bias"]) == 128  # each name, with and without a space
    assert body["post_sampling_probs"] is True and body["temperature"] == 1.0 and body["top_k"] == 0
    assert resp.usage.n_calls == 1

    # the same question through the window (a server not marked): options fall outside it, and are floored
    plain: list[dict] = []
    resp = client_for(server(names, "opt40", plain)).system_one("pick forty", question)
    window = resp.debug["questions"]["q"]["readout"]
    assert window["source"] == "logprobs" and len(window["labels_missing"]) > 40 and window["truncated"]
    assert "logit_bias" not in plain[0] and plain[0]["top_logprobs"] == 20 and plain[0]["temperature"] == 0


def test_names_sharing_a_first_token_are_read_in_the_call_that_asks():
    """alarm_query / alarm_set share "alarm": one call biases every name's tokens and writes the name out (two
    tokens part them), at the path's temperature; its first token gives P(alarm) among every name's first
    token, its second the names' own next tokens ("_query", "_set"), read exactly once turned back."""
    names = list(SHARED)
    seen: list[dict] = []
    sdk = server(names, "alarm_query", seen)
    describe(sdk, exact_readout=True)
    resp = client_for(sdk).system_one("wake me at 7", {"q": Choice(instructions="Which intent?", criteria=SHARED)})
    probs = resp.answers["q"].probabilities
    assert resp.usage.n_calls == 1 and resp.debug["questions"]["q"]["readout"]["source"] == EXACT_SOURCE + "+continuation"
    vocab = vocabulary(names)
    assert seen[0]["max_tokens"] == 2 and seen[0]["temperature"] == PATH_TEMPERATURE
    assert {str(vocab["_query"]), str(vocab["_set"]), str(vocab["alarm"])} <= set(seen[0]["logit_bias"])
    assert resp.answers["q"].choice == "alarm_set"
    cond_set = math.exp(-0.5) / (math.exp(-0.5) + math.exp(-3.0))  # the fake model's "_set" against "_query"
    assert probs["alarm_set"] / probs["alarm_query"] == pytest.approx(cond_set / (1 - cond_set), rel=1e-6)
    _, lps = fake_model(names, "alarm_query")  # and P(alarm) against P(query): the model's own, not the path's
    ratio = math.exp(lps[vocab["alarm"]] - lps[vocab["query"]])
    assert (probs["alarm_set"] + probs["alarm_query"]) / probs["query"] == pytest.approx(ratio, rel=1e-6)


def test_a_shared_prefix_the_path_did_not_take_is_read_on_by_a_call():
    """The path left the leader (it wrote "query" first): "alarm" is read on by a continuation call that
    biases the names' own next tokens ("_query", "_set", from the tokenizer) and splits its share."""
    names = list(SHARED)
    seen: list[dict] = []
    sdk = server(names, "alarm_query", seen, path_first="query")
    describe(sdk, exact_readout=True)
    resp = client_for(sdk).system_one("wake me at 7", {"q": Choice(instructions="Which intent?", criteria=SHARED)})
    probs = resp.answers["q"].probabilities
    assert resp.usage.n_calls == 2 and resp.debug["questions"]["q"]["readout"]["source"] == EXACT_SOURCE + "+continuation"
    vocab = vocabulary(names)
    assert "logit_bias" in seen[0] and seen[1]["messages"][-1]["content"] == "alarm"
    assert seen[1]["logit_bias"] == {str(vocab["_query"]): 100, str(vocab["_set"]): 100} and seen[1]["top_logprobs"] == 2
    assert seen[1]["post_sampling_probs"] is True and seen[1]["continue_final_message"] is True
    assert "grammar" in seen[0] and "grammar" not in seen[1]  # a prefilled name is no name from its start
    assert seen[0]["max_tokens"] == 2 and seen[1]["max_tokens"] == 1 and seen[1]["temperature"] == 1.0
    assert resp.answers["q"].choice == "alarm_set" and probs["alarm_set"] > probs["query"]
    cond_set = math.exp(-0.5) / (math.exp(-0.5) + math.exp(-3.0))  # the fake model's "_set" against "_query"
    assert probs["alarm_set"] / probs["alarm_query"] == pytest.approx(cond_set / (1 - cond_set), rel=1e-6)
    assert sum(probs.values()) == pytest.approx(1.0)


def test_a_continuation_reads_the_window_where_the_prefix_is_not_the_names_own_token():
    """The prefix the model led with is not the names' own first token (here the reply carries no token id):
    the continuation call reads the top-20 window, without the first token's bias."""
    names = list(SHARED)
    seen: list[dict] = []
    sdk = server(names, "alarm_query", seen, with_ids=False)
    describe(sdk, exact_readout=True)
    resp = client_for(sdk).system_one("wake me at 7", {"q": Choice(instructions="Which intent?", criteria=SHARED)})
    assert resp.usage.n_calls == 2 and "logit_bias" not in seen[1] and "post_sampling_probs" not in seen[1]
    assert seen[1]["temperature"] == 0 and seen[1]["top_logprobs"] == 20


def test_request_fields_are_unchanged_without_a_token_table():
    prep = prepare_questions("s", {"q": Choice(instructions="?", criteria={"a": "", "b": ""})}, "logprobs")[0]
    fields, extra = request_fields("logprobs", prep, MethodConfig(), ("a", "b"))
    assert fields == {"temperature": 0, "logprobs": True, "top_logprobs": 20, "max_tokens": 1}
    assert extra == {"chat_template_kwargs": {"enable_thinking": False}}
    table = {"a": 1, " a": 2, "b": 3}
    exact, exact_extra = request_fields("logprobs", prep, MethodConfig(token_ids=table), ("a", "b"))
    assert exact["logit_bias"] == {"1": 100, "2": 100, "3": 100} and exact["top_logprobs"] == 3
    assert window_only(exact, exact_extra, 20) == (fields, extra)
    # a symbol whose own form has no id, or a JSON method, or thinking on: the window, as before
    assert exact_ids(("a", "c"), table) is None
    assert "logit_bias" not in request_fields("grammar", prep, MethodConfig(token_ids=table), ("a", "b"))[0]
    assert "logit_bias" not in request_fields("logprobs", prep, MethodConfig(thinking=True, token_ids=table),
                                              ("a", "b"))[0]


def test_the_token_table_keeps_other_casings_only_where_they_are_one_token():
    """"Insect" starts with "In", as a reply that is no answer does: never biased for the name "insect"."""
    pieces = {"insect": [5], " insect": [6], "Insect": [9, 10], " Insect": [11, 12], "yes": [1], "Yes": [2],
              " yes": [3], " Yes": [4]}
    calls: list[str] = []

    def tokenize(text: str) -> list[int]:
        calls.append(text)
        return pieces[text]

    table = TokenTable.of(True, tokenize)
    assert table is not None and TokenTable.of(False, tokenize) is None  # only a server that reads exactly
    assert table.ids(["insect", "yes"]) == {"insect": 5, " insect": 6, "yes": 1, " yes": 3, "Yes": 2, " Yes": 4}
    n = len(calls)
    table.ids(["insect"])
    assert len(calls) == n  # asked once

    def broken(text: str) -> list[int]:
        raise OSError("down")

    assert TokenTable(broken).ids(["a"]) is None


def test_the_post_sampling_shape_is_read_as_logprobs_and_others_are_untouched():
    post = {"content": [{"token": "a", "prob": 0.75, "top_probs": [{"token": "a", "prob": 0.75},
                                                                   {"token": "b", "prob": 0.25}, {"token": "c", "prob": 0.0}]}]}
    got = as_logprobs(post)["content"][0]
    assert got["logprob"] == pytest.approx(math.log(0.75)) and "top_probs" not in got
    assert [c["logprob"] for c in got["top_logprobs"]] == [pytest.approx(math.log(0.75)),
                                                          pytest.approx(math.log(0.25)), -math.inf]
    plain = {"content": [{"token": "a", "logprob": -0.1, "top_logprobs": []}]}
    assert as_logprobs(plain) is plain and as_logprobs(None) is None


def test_names_that_share_a_first_token_below_the_top_get_their_share_not_the_floor():
    """alarm_query / alarm_set share "alarm", which does not lead: no continuation call, and each gets half of
    P(alarm) from the exact read (the window floored both at its lowest logprob)."""
    names = WORDS[:61] + list(SHARED)
    question = {"q": Choice(instructions="Which option?", criteria={n: f"option {n}" for n in names})}
    seen: list[dict] = []
    sdk = server(names, "opt40", seen)
    describe(sdk, exact_readout=True)
    resp = client_for(sdk).system_one("pick forty", question)
    probs = resp.answers["q"].probabilities
    assert resp.usage.n_calls == 1 and resp.answers["q"].choice == "opt40" and len(probs) == 64
    _, lps = fake_model(names, "opt40")
    vocab = vocabulary(names)
    firsts = dict.fromkeys(n.split("_")[0] for n in names)
    z = sum(math.exp(lps[vocab[f]]) for f in firsts)
    assert probs["alarm_query"] == pytest.approx(math.exp(lps[vocab["alarm"]]) / 2 / z, rel=1e-6)
    assert probs["alarm_set"] == probs["alarm_query"] and probs["query"] == pytest.approx(
        math.exp(lps[vocab["query"]]) / z, rel=1e-6)
    assert resp.debug["questions"]["q"]["readout"]["labels_missing"] == []


def test_a_prior_measured_through_the_window_is_not_reused_by_the_exact_readout():
    """Debias priors are kept by prompt AND readout: the top-20 window's lean is not the exact read's."""
    names = WORDS[:4]
    question = {"q": Choice(instructions="Which option?", criteria={n: f"option {n}" for n in names})}
    memory = Memory()
    window_sent: list[dict] = []
    SystemOneClient(server(names, names[1], window_sent), model="some-model", api="chat_completions",
                    calibrator=None, debias=True, memory=memory).system_one("pick", question)
    assert len(window_sent) == 4  # the answer and three content-free twins
    exact_sent: list[dict] = []
    sdk = describe(server(names, names[1], exact_sent), exact_readout=True)
    SystemOneClient(sdk, model="some-model", api="chat_completions", calibrator=None, debias=True,
                    memory=memory).system_one("pick", question)
    assert len(exact_sent) == 4 and all("logit_bias" in body for body in exact_sent)  # measured again, exactly
