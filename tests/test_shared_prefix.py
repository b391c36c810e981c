"""Names that share a first token: the debias prior is read as the answers are (issue 32, part two).

Intent names such as ``alarm_query`` / ``alarm_set`` / ``play_music`` share a scenario prefix. The small
model answers the first option's prefix (``alarm``) whatever the state, content-free states included: a
lean debias is there to divide out. The prior's rows floored every name of a shared token, so the
strongest lean read as the weakest, and dividing by it crowned ``alarm_query`` (44 of 60 items in the
issue). The fake window here answers by the state and the assistant prefill, over the real openai SDK.
"""

from __future__ import annotations

import json

import httpx
import openai

from jev_shared import Choice, SystemOneClient
from jev_shared.labels import aliases_for
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
