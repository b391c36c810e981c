"""The user's own chat model as the engine's backend."""

from __future__ import annotations

import asyncio
import math

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from jev_langchain import JevGate, JevRouter, jev_async_client_from_chat_model, jev_client_from_chat_model
from jev_langchain.chat_model import ChatModelClient, completion_dict, default_forward
from jev_shared import Choice

from .fakes import ScriptedChatModel


def chat_openai(local_server, **kw):
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=local_server.base_url, api_key="local", model=local_server.model, logprobs=True,
                      top_logprobs=20, **kw)


def json_model(reply: str) -> ScriptedChatModel:
    """A chat model that returns no logprobs at all, only the JSON it is told to give."""
    return ScriptedChatModel(replies=[AIMessage(reply)])


def test_a_model_without_logprobs_is_answered_by_a_json_method():
    model = json_model('{"probabilities": {"billing": 0.8, "tech": 0.2}}')
    client = jev_client_from_chat_model(model)
    resp = client.system_one("charged twice", {"route": Choice(instructions="Which team?",
                                                               criteria={"billing": "Money", "tech": "Bugs"})})
    assert resp.answers["route"].choice == "billing"
    assert resp.answers["route"].probabilities["billing"] == pytest.approx(0.8)
    assert resp.debug["methods"]["route"] == "structured"
    assert client.model == "scripted"


def test_only_the_fields_a_model_declares_are_forwarded():
    model = json_model('{"noul": 0.9}')
    assert default_forward(model) == frozenset()
    jev_client_from_chat_model(model).noul("x", "It is fine.")
    assert all(r["kwargs"] == {} for r in model.received)


def test_openai_family_gets_every_field():
    from langchain_openai import ChatOpenAI

    forward = default_forward(ChatOpenAI(api_key="x", model="m"))
    assert {"logprobs", "top_logprobs", "max_tokens", "temperature", "response_format", "extra_body"} <= forward


def test_completion_dict_reads_logprobs_usage_and_finish_reason():
    msg = AIMessage("A", response_metadata={"finish_reason": "max_tokens", "logprobs": [{"token": "A", "logprob": -0.1}]},
                    usage_metadata={"input_tokens": 7, "output_tokens": 1, "total_tokens": 8})
    body = completion_dict(msg)
    choice = body["choices"][0]
    assert choice["message"]["content"] == "A" and choice["finish_reason"] == "length"
    assert choice["logprobs"] == {"content": [{"token": "A", "logprob": -0.1}]}
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 1}


def test_the_model_own_extra_body_is_kept():
    from langchain_openai import ChatOpenAI

    adapter = ChatModelClient(ChatOpenAI(api_key="x", model="m", extra_body={"mine": 1}))
    _, kwargs = adapter._request({"model": "m", "messages": [], "extra_body": {"grammar": "g"}, "logprobs": True})
    assert kwargs == {"extra_body": {"mine": 1, "grammar": "g"}, "logprobs": True}


def test_a_chat_model_serves_the_router_sync_and_async():
    model = json_model('{"probabilities": {"a": 0.1, "b": 0.9}}')
    router = JevRouter(model, {"a": ("A", lambda x: "A"), "b": ("B", lambda x: "B")})
    assert router.invoke("x") == "B"
    assert asyncio.run(router.ainvoke("x")) == "B"


@pytest.mark.live
def test_live_chat_openai_backend_reads_logprobs(local_server):
    client = jev_client_from_chat_model(chat_openai(local_server))
    resp = client.system_one("I was charged twice", {"team": Choice(
        instructions="Which team?", criteria={"billing": "Invoices", "technical": "Bugs", "sales": "Prices"})})
    answer = resp.answers["team"]
    assert resp.debug["methods"]["team"] == "logprobs"
    assert answer.choice in {"billing", "technical", "sales"}
    assert math.isclose(sum(answer.probabilities.values()), 1.0, abs_tol=1e-6)
    assert resp.usage.input_tokens and resp.usage.input_tokens > 0


@pytest.mark.live
def test_live_chat_model_runs_nest_under_the_router(local_server, recorder):
    router = JevRouter(chat_openai(local_server),
                       {"billing": ("Invoices", RunnableLambda(lambda x: "billing", name="billing")),
                        "technical": ("Bugs", RunnableLambda(lambda x: "technical", name="technical"))})
    out = router.invoke("The app crashes on start", {"callbacks": [recorder], "tags": ["t"]})
    assert out in {"billing", "technical"}
    top, decide = recorder.one("JevRouter"), recorder.one("jev_route")
    [llm] = [r for r in recorder.runs if r["kind"] == "chat_model"]
    assert decide["parent"] == top["id"] and llm["parent"] == decide["id"] and "t" in llm["tags"]
    assert recorder.one(out)["parent"] == top["id"]


@pytest.mark.slow
@pytest.mark.live
def test_live_async_chat_model_backend_nests_too(local_server, recorder):
    gate = JevGate(jev_async_client_from_chat_model(chat_openai(local_server)), "The text is in English.",
                   threshold=0.0)
    assert asyncio.run(gate.ainvoke("Hello there", {"callbacks": [recorder]})) == "Hello there"
    [llm] = [r for r in recorder.runs if r["kind"] == "chat_model"]
    assert llm["parent"] == recorder.one("jev_gate")["id"]
