"""The user's own LlamaIndex LLM as the engine's backend (jev_llamaindex.llm)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, ChatResponse, LogProb
from llama_index.core.llms import MockLLM
from llama_index.core.tools.types import ToolMetadata

from jev_llamaindex import JevSingleSelector, LlamaIndexLLMClient, chat_response_to_dict, system_one_clients
from jev_llamaindex.llm import recover_sampled
from jev_shared import ClientCapabilityError

from .conftest import TOOLS

META = [ToolMetadata(name=n, description=d) for n, d in TOOLS]


class WindowLLM(MockLLM):
    """A user's chat LLM with a fixed logprob window: it stands in because a real model's choice cannot
    be fixed. Like LlamaIndex's integrations it reports only the alternatives, never the sampled token,
    and keeps no raw Chat Completion, so the adapter has to recover the sampled token from the text.

    Kept as a double (LlamaIndex's own ``MockLLM``, not an SDK client): it is the user's *LlamaIndex LLM*
    that the adapter reads, and the shape it pins (alternatives only, no raw reply) is what integrations
    other than OpenAI's return; OpenAI's own, over the provider double, would carry the raw reply."""

    window: dict[str, float] = {}
    seen: list[dict[str, Any]] = []

    def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        self.seen.append({"messages": list(messages), **kwargs})
        top = max(self.window, key=self.window.__getitem__)
        alts = [LogProb(token=t, logprob=lp) for t, lp in self.window.items()]
        return ChatResponse(message=ChatMessage(role="assistant", content=top), logprobs=[alts],
                            additional_kwargs={"prompt_tokens": 12, "completion_tokens": 1})

    async def achat(self, messages: Any, **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)


def window_llm(window: dict[str, float]) -> WindowLLM:
    llm = WindowLLM(is_chat_model=True)
    llm.window, llm.seen = window, []
    return llm


def test_recover_sampled_picks_the_window_token_the_text_starts_with():
    entries = recover_sampled("B", [[LogProb(token="A", logprob=-1.2), LogProb(token="B", logprob=-0.4)]])
    assert entries[0]["token"] == "B" and entries[0]["logprob"] == -0.4
    assert [a["token"] for a in entries[0]["top_logprobs"]] == ["A", "B"]


def test_recover_sampled_outside_the_window_gets_the_lowest_logprob():
    entries = recover_sampled("Z", [[LogProb(token="A", logprob=-1.2), LogProb(token="B", logprob=-3.0)]])
    assert entries[0]["token"] == "Z" and entries[0]["logprob"] == -3.0


def test_recover_sampled_walks_several_positions():
    pos = [[LogProb(token="Hel", logprob=-0.1), LogProb(token="He", logprob=-0.5)], [LogProb(token="lo", logprob=-0.2)]]
    assert [e["token"] for e in recover_sampled("Hello", pos)] == ["Hel", "lo"]


def test_raw_chat_completion_is_used_when_kept():
    raw = {"choices": [{"message": {"content": "B"}, "finish_reason": "length", "logprobs": {"content": []}}]}
    resp = ChatResponse(message=ChatMessage(role="assistant", content="ignored"), raw=raw)
    assert chat_response_to_dict(resp) is not raw and chat_response_to_dict(resp) == raw


def test_selector_on_a_llamaindex_llm_reads_its_window():
    llm = window_llm({"A": -3.0, "B": -0.1, "C": -2.5})
    selector = JevSingleSelector.from_defaults(llm=llm, labels="letters")
    result = selector.select(META, "How fast is a Ferrari?")
    assert result.ind == 1 and result.method == "logprobs"
    assert result.probabilities["cars"] > 0.8
    sent = llm.seen[0]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20 and "model" not in sent
    assert isinstance(sent["messages"][0], ChatMessage) and "cars" in sent["messages"][0].content
    assert result.response.usage.input_tokens == 12


def test_selector_on_a_llamaindex_llm_async_uses_achat():
    llm = window_llm({"A": -0.1, "B": -3.0, "C": -2.5})
    result = asyncio.run(JevSingleSelector.from_defaults(llm=llm, labels="letters").aselect(META, "Do cats sleep?"))
    assert result.ind == 0


def test_system_one_clients_take_the_llms_model_name():
    sync, async_ = system_one_clients(window_llm({"A": 0.0}), confidence="entropy")
    assert sync.model == async_.model == "unknown"  # MockLLM's model_name
    assert sync.confidence == "entropy"


def test_completion_only_llm_rejected_with_the_fix():
    with pytest.raises(ClientCapabilityError, match="is_chat_model=True"):
        LlamaIndexLLMClient(MockLLM())
    with pytest.raises(ClientCapabilityError, match="chat"):
        LlamaIndexLLMClient(object())


def test_llm_and_client_together_rejected():
    with pytest.raises(ValueError, match="either llm="):
        JevSingleSelector.from_defaults(object(), llm=window_llm({"A": 0.0}))


# -- live: OpenAILike on the embedded server ----------------------------------------------------------


@pytest.mark.live
def test_live_openai_like_llm_sends_what_the_direct_client_sends(local_server):
    """Through the LLM (logprobs=True, top_logprobs=20) the server gets the engine's very request."""
    import httpx
    import openai
    from llama_index.llms.openai_like import OpenAILike

    bodies: list[dict[str, Any]] = []

    def record(request: httpx.Request) -> None:
        if request.url.path.endswith("/chat/completions"):  # the engine may probe other surfaces first
            bodies.append({k: v for k, v in json.loads(request.content).items() if k != "stream"})

    http = httpx.Client(event_hooks={"request": [record]})
    llm = OpenAILike(model=local_server.model, api_base=local_server.base_url, api_key="local", is_chat_model=True,
                     logprobs=True, top_logprobs=20, http_client=http)
    direct = openai.OpenAI(base_url=local_server.base_url, api_key="local", http_client=http)
    via_llm = JevSingleSelector.from_defaults(llm=llm).select(META, "How fast is a Ferrari?")
    JevSingleSelector.from_defaults(direct, model=local_server.model).select(META, "How fast is a Ferrari?")
    assert len(bodies) == 2 and bodies[0] == bodies[1]
    assert bodies[0]["logprobs"] is True and bodies[0]["max_tokens"] == 1
    assert via_llm.method == "logprobs" and len(via_llm.inds) == 1
    assert sum(via_llm.probabilities.values()) == pytest.approx(1.0)


@pytest.mark.live
def test_live_openai_like_without_raw_recovers_the_sampled_token(local_llm):
    """Dropping ``raw`` leaves LlamaIndex's alternatives-only logprobs; the recovered entry equals the raw one."""
    from llama_index.llms.openai_like import OpenAILike

    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []

    class NoRaw(OpenAILike):
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            full = super().chat(messages, **kwargs)
            stripped = ChatResponse(message=full.message, logprobs=full.logprobs)
            pairs.append((chat_response_to_dict(full), chat_response_to_dict(stripped)))
            return stripped

    no_raw = NoRaw(**local_llm.model_dump(include={"model", "api_base", "api_key", "is_chat_model", "logprobs",
                                                    "top_logprobs"}))
    result = JevSingleSelector.from_defaults(llm=no_raw).select(META, "Do cats sleep a lot?")
    assert result.method == "logprobs" and sum(result.probabilities.values()) == pytest.approx(1.0)
    raw, recovered = pairs[0]
    raw_entry = raw["choices"][0]["logprobs"]["content"][0]
    entry = recovered["choices"][0]["logprobs"]["content"][0]
    assert (entry["token"], entry["logprob"]) == (raw_entry["token"], raw_entry["logprob"])
    assert [(a["token"], a["logprob"]) for a in entry["top_logprobs"]] == [
        (a["token"], a["logprob"]) for a in raw_entry["top_logprobs"]]


@pytest.mark.live
def test_live_openai_like_async(local_llm):
    result = asyncio.run(JevSingleSelector.from_defaults(llm=local_llm).aselect(META, "Which airline flies to Oslo?"))
    assert result.method == "logprobs" and len(result.inds) == 1 and 0 <= result.ind < 3
    assert sum(result.probabilities.values()) == pytest.approx(1.0)
