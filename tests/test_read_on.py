"""Names that share more than one token are read on until the model tells them apart.

Banking77's ``declined_card_payment`` / ``declined_cash_withdrawal`` / ``declined_transfer`` share
``declined`` and then ``_``: one continuation call split the group evenly and the names' order broke
the tie (the first won 21 of 60 zero-shot items). The fake window here answers by the assistant
prefill, over the real openai SDK (``httpx.MockTransport``).
"""

from __future__ import annotations

import json

import httpx
import openai

from jev_shared import Choice, SystemOneClient
from jev_shared.flows import CONTINUATION_DEPTH
from tests.helpers.replies import chat_tokens

NAMES = {"declined_card_payment": "declined card payment", "declined_cash_withdrawal": "declined cash withdrawal",
         "declined_transfer": "declined transfer", "card_payment": "card payment"}  # no aliases: they would clash
WINDOWS = {None: [("declined", -0.2), ("card", -2.0)], "declined": [("_", -0.01), ("ly", -6.0)],
           "declined_": [("transfer", -0.1), ("card", -2.5), ("cash", -3.5)]}


def _reply(request: httpx.Request) -> httpx.Response:
    body = json.loads(request.content)
    last = body["messages"][-1]
    prefill = last["content"] if last["role"] == "assistant" else None
    window = WINDOWS[prefill]
    return httpx.Response(200, json=chat_tokens(window, usage=(10, 1)))


def test_a_prefix_shared_past_its_first_token_is_read_on_until_it_parts() -> None:
    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k",
                        http_client=httpx.Client(transport=httpx.MockTransport(_reply)))
    client = SystemOneClient(sdk, model="some-model", api="chat_completions", calibrator=None, debias=False)
    resp = client.system_one("my transfer was declined", {"q": Choice(instructions="Which intent?", criteria=NAMES)})
    probs = resp.answers["q"].probabilities
    assert resp.answers["q"].choice == "declined_transfer"  # not the first of a three-way tie
    assert probs["declined_transfer"] > probs["declined_card_payment"] > probs["declined_cash_withdrawal"]
    assert resp.usage.n_calls == 3 and resp.usage.output_tokens == 3  # the answer, "declined", "declined_"
    assert abs(sum(probs.values()) - 1.0) < 1e-9


def test_reading_on_stops_after_three_continuation_calls() -> None:
    """A server that never parts the names (each prefill answered by ``_``) costs at most 3 calls more, and
    a next token that spells no name ends the reading."""
    def forever(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        last = body["messages"][-1]
        window = [("_", -0.01), ("x", -6.0)] if last["role"] == "assistant" else WINDOWS[None]
        content = [{"token": window[0][0], "logprob": window[0][1],
                    "top_logprobs": [{"token": t, "logprob": lp} for t, lp in window]}]
        return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                                         "choices": [{"index": 0, "message": {"role": "assistant",
                                                                              "content": window[0][0]},
                                                      "logprobs": {"content": content}, "finish_reason": "length"}],
                                         "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}})

    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k",
                        http_client=httpx.Client(transport=httpx.MockTransport(forever)))
    client = SystemOneClient(sdk, model="some-model", api="chat_completions", calibrator=None, debias=False)
    resp = client.system_one("declined", {"q": Choice(instructions="Which intent?", criteria=NAMES)})
    assert resp.usage.n_calls <= 1 + CONTINUATION_DEPTH
    assert abs(sum(resp.answers["q"].probabilities.values()) - 1.0) < 1e-9
