"""A flow driven by hand, with no client and no driver: the engine's decisions are plain generators.

The flow yields each request as a Call and is sent each reply (or thrown the ProviderError the
transport would raise); nothing here does I/O.
"""

from __future__ import annotations

import pytest

from jev_shared import Choice, ProviderError
from jev_shared.calls import Reply
from jev_shared.flows import Ask, answer
from jev_shared.memory import Memory
from jev_shared.options import Options
from jev_shared.questions import prepare_question
from jev_shared.record import Record

TEAM = Choice(instructions="Which team?", criteria={"billing": "", "technical": "", "sales": ""})
SPEAKS = ("responses", "chat_completions")


def ask(memory: Memory | None = None, **options) -> Ask:
    prep = prepare_question("team", TEAM, options.get("method", "auto"))
    options.setdefault("debias", False)  # the client resolves "auto"; a flow driven by hand sets it
    return Ask(prep, "I was charged twice", Options(model="m", **options), memory or Memory(), SPEAKS, Record(True))


def chat_reply(content: str, window: list[tuple[str, float]] | None = None) -> Reply:
    choice = {"message": {"content": content}, "finish_reason": "length" if window else "stop"}
    if window:
        choice["logprobs"] = {"content": [{"token": window[0][0], "logprob": window[0][1],
                                           "top_logprobs": [{"token": t, "logprob": v} for t, v in window]}]}
    return Reply({"choices": [choice], "usage": {"prompt_tokens": 9, "completion_tokens": 1}}, 0.0)


def test_responses_without_logprobs_moves_to_chat_then_a_refused_field_falls_back_to_structured():
    memory = Memory()
    flow = answer(ask(memory))
    first = next(flow)
    assert first.surface == "responses" and first.kwargs["include"] == ["message.output_text.logprobs"]
    # llama.cpp's Responses route: a 200 whose logprobs list is empty
    empty = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "billing", "logprobs": []}]}]}
    second = flow.send(Reply(empty, 0.0))
    assert second.surface == "chat_completions" and second.kwargs["max_tokens"] == 1
    # the server refuses logprobs by name: the readout field cannot be dropped, so structured answers
    refusal = ProviderError("provider error 400", status_code=400, provider_message="logprobs is not supported",
                            body={"error": {"param": "logprobs", "code": "unsupported_parameter"}})
    third = flow.throw(refusal)
    assert third.kwargs["response_format"]["type"] == "json_schema" and "logprobs" not in third.kwargs
    with pytest.raises(StopIteration) as done:
        flow.send(chat_reply('{"probabilities": {"billing": 0.8, "technical": 0.15, "sales": 0.05}}'))
    assert done.value.value.choice == "billing"
    assert memory.answers_with_structured(("m", "chat_completions"))  # remembered for the next call
    assert memory.surface_for("m", "logprobs", "auto", SPEAKS) == "chat_completions"


def test_a_window_read_by_name_in_one_step():
    flow = answer(ask(api="chat_completions", method="logprobs"))
    call = next(flow)
    assert call.kwargs["top_logprobs"] == 20 and "billing" in call.kwargs["messages"][0]["content"]
    with pytest.raises(StopIteration) as done:
        flow.send(chat_reply("billing", [("billing", -0.1), ("technical", -2.5), ("sales", -4.0)]))
    assert done.value.value.choice == "billing" and done.value.value.confidence > 0.8
