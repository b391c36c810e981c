"""Names that share a first token: the debias prior is read as the answers are.

Intent names such as ``alarm_query`` / ``alarm_set`` / ``play_music`` share a scenario prefix. The small
model answers the first option's prefix (``alarm``) whatever the state, content-free states included: a
lean debias is there to divide out. The prior's rows floored every name of a shared token, so the
strongest lean read as the weakest, and dividing by it crowned ``alarm_query`` (44 of 60 items in the
issue). The fake window here answers by the state and the assistant prefill, over the real openai SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import openai
import pytest

from jev_shared import Choice, SystemOneClient
from jev_shared.backend import describe
from jev_shared.labels import aliases_for
from jev_shared.local import LocalServer
from jev_shared.readon import lead_unread
from jev_shared.readout import Readout, unread
from tests.helpers.local import started
from tests.helpers.replies import chat_tokens

#: no short aliases: with the scenario dropped they would clash (query, set, query, set)
NAMES = {n: n.replace("_", " ") for n in ("alarm_query", "alarm_set", "calendar_query", "calendar_set", "music",
                                          "weather")}
#: the first option's prefix leads for every state; the real state moves some mass to its own option
FIRST = {"content-free": [("alarm", -0.05), ("weather", -4.0), ("music", -5.0), ("calendar", -6.0)],
         "play some jazz": [("alarm", -0.4), ("music", -1.2), ("weather", -5.0), ("calendar", -6.0)]}
NEXT = {"alarm": [("_query", -0.2), ("_set", -1.8)], "calendar": [("_query", -0.2), ("_set", -1.8)]}


def _reply(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    last = body["messages"][-1]
    if last["role"] == "assistant":
        return httpx.Response(200, json=chat_tokens(NEXT[last["content"]], usage=(10, 1)))
    state = last["content"].rsplit("<state>\n", 1)[-1]
    return httpx.Response(200, json=chat_tokens(FIRST.get(state, FIRST["content-free"]), usage=(10, 1)))


def _client() -> SystemOneClient:
    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k",
                        http_client=httpx.Client(transport=httpx.MockTransport(_reply)))
    return SystemOneClient(sdk, model="some-model", api="chat_completions", calibrator=None, debias=True)


def test_the_prior_of_names_sharing_a_prefix_is_read_on_not_floored() -> None:
    resp = _client().system_one("play some jazz", {"q": Choice(instructions="Which intent?", criteria=NAMES)},
                                debug=True)
    prior = resp.debug["priors"]["q"]
    assert prior["alarm_query"] > 0.5 and prior["alarm_set"] > 0.1  # the lean, as the answers read it
    assert abs(sum(prior.values()) - 1.0) < 1e-9
    assert resp.answers["q"].choice == "music"  # the lean divided out, not crowned


def test_the_prior_costs_its_read_on_calls_once() -> None:
    client = _client()
    q = {"q": Choice(instructions="Which intent?", criteria=NAMES)}
    first = client.system_one("play some jazz", q, debug=True)
    again = client.system_one("play some jazz", q, debug=True)
    assert first.debug["prior_calls"]["q"] == 6  # three content-free states, each read on once
    assert again.usage.n_calls == 2 and "prior_calls" not in again.debug  # the answer and its read-on


def test_camel_case_names_keep_the_verb_that_tells_them_apart() -> None:
    """Dropping each group's shared first word left ``Restaurants`` / ``Restaurant`` for ``FindRestaurants`` /
    ``ReserveRestaurant``: one starts the other, and find / reserve, what told them apart, was gone."""
    names = ["FindRestaurants", "ReserveRestaurant", "FindHotels", "ReserveHotel", "GetWeather"]
    assert aliases_for(names) == tuple(names)  # read by name, "Find" / "Reserve" read on
    assert aliases_for(["orderStatus", "orderCancel", "refund"]) == ("Status", "Cancel", "refund")
    assert aliases_for(["count", "country", "order_status", "order_cancel"]) == ("count", "country", "status", "cancel")


#: An exact read (llama.cpp: the answer words' own tokens biased, their probabilities renormalised): the
#: first option's prefix leads for every state, the radio request moves mass to ``play``.
VOCAB = {t: 1000 + i for i, t in enumerate(["alarm", "calendar", "play", "weather", "_query", "_set", "_music",
                                              "_radio"])}
PLAY = {n: n.replace("_", " ") for n in ("alarm_query", "alarm_set", "calendar_query", "calendar_set", "play_music",
                                         "play_radio", "weather")}  # no short aliases: query, set would clash
EXACT_FIRST = {"content-free": {"alarm": 0.88, "calendar": 0.02, "play": 0.05, "weather": 0.05},
               "play the radio": {"alarm": 0.68, "calendar": 0.02, "play": 0.25, "weather": 0.05}}
EXACT_NEXT = {"alarm": {"_query": 0.8, "_set": 0.2}, "calendar": {"_query": 0.5, "_set": 0.5},
              "play": {"_music": 0.1, "_radio": 0.9}}


def _exact_server(seen: list[dict]) -> openai.OpenAI:
    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        last = body["messages"][-1]
        if last["role"] == "assistant":
            probs = EXACT_NEXT[last["content"]]
        else:
            probs = EXACT_FIRST.get(last["content"].rsplit("<state>\n", 1)[-1], EXACT_FIRST["content-free"])
        assert body.get("post_sampling_probs") and {VOCAB[t] for t in probs} <= {int(i) for i in body["logit_bias"]}
        alts = [{"id": VOCAB[t], "token": t, "prob": p} for t, p in sorted(probs.items(), key=lambda kv: -kv[1])]
        entry = {**alts[0], "top_probs": alts}
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "length", "logprobs": {"content": [entry]},
                         "message": {"role": "assistant", "content": entry["token"]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})

    def tokenize(text: str) -> list[int]:
        head, _, rest = text.strip().partition("_")
        ids = [VOCAB[head]] if head in VOCAB else [7, 7]
        return ids + ([VOCAB["_" + rest]] if rest and "_" + rest in VOCAB else [])

    sdk = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="local",
                        http_client=httpx.Client(transport=httpx.MockTransport(reply)))
    describe(sdk, surfaces=("chat_completions",), tokenize=tokenize, exact_readout=True)
    return sdk


def test_a_shared_prefix_that_leads_once_the_prior_is_divided_out_is_read_on_too() -> None:
    """``alarm`` leads the read and is read on; ``play`` is given an even share (play_music = play_radio).
    Divided by the prior, ``play`` leads: it is read on as well, so the model tells its names apart, not
    their order (play_music, listed first, won every such tie)."""
    seen: list[dict] = []
    client = SystemOneClient(_exact_server(seen), model="some-model", api="chat_completions", calibrator=None,
                             debias=True)
    resp = client.system_one("play the radio", {"q": Choice(instructions="Which intent?", criteria=PLAY)}, debug=True)
    probs = resp.answers["q"].probabilities
    assert resp.answers["q"].choice == "play_radio" and probs["play_radio"] > 5 * probs["play_music"]
    assert sum(probs.values()) == pytest.approx(1.0)
    prefills = [b["messages"][-1]["content"] for b in seen if b["messages"][-1]["role"] == "assistant"]
    assert prefills[-1] == "play" and seen[-1]["logit_bias"] == {str(VOCAB["_music"]): 100, str(VOCAB["_radio"]): 100}
    again = client.system_one("play the radio", {"q": Choice(instructions="Which intent?", criteria=PLAY)})
    assert again.usage.n_calls == 3  # the answer, "alarm" read on, "play" read on: the prior is remembered


def test_only_names_given_a_share_of_a_token_are_read_on_for_it() -> None:
    """``t`` starts ``transfer`` (read by its own token) and ``tire_change`` / ``traffic`` (given an even share of
    ``t``): a lead by ``transfer`` reads nothing more, and a read-on of ``t`` splits only the share."""
    labels = ["transfer", "tire_change", "traffic", "recipe"]
    own = {"transfer": -0.1, "recipe": -3.0}
    ro = Readout([0.7, 0.1, 0.1, 0.1], unread=unread(labels, own, {"t": -2.0}, {"t": 83}))
    assert ro.unread == {"t": (83, ("tire_change", "traffic"))}
    assert lead_unread(ro, labels, [0.7, 0.1, 0.1, 0.1]) is None
    assert lead_unread(ro, labels, [0.2, 0.35, 0.35, 0.1]) == ("t", ["tire_change", "traffic"])


SCENARIO = ["alarm_query", "alarm_set", "alarm_remove", "calendar_query", "calendar_set", "calendar_remove",
            "weather_query", "play_music", "play_radio", "email_sendemail", "email_query", "iot_hue_lightoff",
            "iot_hue_lightup", "news_query", "transport_ticket", "transport_query", "qa_factoid", "general_quirky",
            "takeaway_order", "recommendation_events"]


@pytest.fixture(scope="module")
def qwen05() -> Iterator[LocalServer]:
    yield from started("qwen2.5-coder-0.5b")


@pytest.mark.live
@pytest.mark.qwen
def test_the_05b_does_not_answer_the_first_scenario_for_every_request(qwen05: LocalServer) -> None:
    """A router's naming (``scenario_action``, 20 options, each described by its name in words): the 0.5B
    leads with ``alarm`` (the first option's prefix) for every state, the empty one included. Measured, that
    lean is divided out; floored in the prior, it had made every answer ``alarm_query``."""
    client = SystemOneClient(qwen05.client(), model=qwen05.model, calibrator=None, debias=True)
    q = {"q": Choice(instructions="What does the user want the assistant to do?",
                     criteria={n: n.replace("_", " ") for n in SCENARIO})}
    resp = client.system_one("what's the weather like in paris", q, debug=True)
    prior = resp.debug["priors"]["q"]
    assert sum(prior[n] for n in SCENARIO if n.startswith("alarm")) > 0.5  # the lean, measured
    assert resp.answers["q"].choice == "weather_query"
    assert client.system_one("cancel my alarm for tomorrow", q).answers["q"].choice == "alarm_remove"


def test_names_read_on_under_one_prefix_are_not_split_again_under_a_shorter_one() -> None:
    """ALL_CAPS names share fragments: ``CH`` (read on: ``CHANGE_MOBILE_NUMBER`` 0.99) and ``C``, which starts
    them too. The names read on under ``CH`` have a reading of their own: ``C`` is not read on for them."""
    from jev_shared.labels import AmbiguousNamesError

    labels = ["CHANGE_MOBILE_NUMBER", "CHECK_WALLET", "CANNOT_SEE", "CASH_BONUS"]
    exc = AmbiguousNamesError("x", token="CH", logprob=-0.1, best={}, returned=[-0.1, -3.0],
                              shared={"CH": -0.1, "C": -3.0}, shared_ids={"CH": 1, "C": 2})
    group = ["CHANGE_MOBILE_NUMBER", "CHECK_WALLET"]
    read = {**exc.best, **dict.fromkeys(group, 0.0)}
    assert unread(labels, read, {"C": -3.0}, exc.shared_ids) == {"C": (2, ("CANNOT_SEE", "CASH_BONUS"))}
