"""The user's own LlamaIndex LLM as the engine's backend (jev_llamaindex.llm)."""

from __future__ import annotations

import asyncio
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
    and keeps no raw Chat Completion, so the adapter has to recover the sampled token from the text."""

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
    selector = JevSingleSelector.from_defaults(llm=llm)
    result = selector.select(META, "How fast is a Ferrari?")
    assert result.ind == 1 and result.method == "logprobs"
    assert result.probabilities["cars"] > 0.8
    sent = llm.seen[0]
    assert sent["logprobs"] is True and sent["top_logprobs"] == 20 and "model" not in sent
    assert isinstance(sent["messages"][0], ChatMessage) and "cars" in sent["messages"][-1].content
    assert result.response.usage.input_tokens == 12


def test_selector_on_a_llamaindex_llm_async_uses_achat():
    llm = window_llm({"A": -0.1, "B": -3.0, "C": -2.5})
    result = asyncio.run(JevSingleSelector.from_defaults(llm=llm).aselect(META, "Do cats sleep?"))
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
def test_live_openai_like_llm_matches_the_direct_client(local_server, local_llm):
    """Through the LLM (logprobs=True, top_logprobs=20) the engine reads the same window as directly."""
    via_llm = JevSingleSelector.from_defaults(llm=local_llm).select(META, "How fast is a Ferrari?")
    direct = JevSingleSelector.from_defaults(local_server.client(), model=local_server.model).select(
        META, "How fast is a Ferrari?")
    assert via_llm.method == "logprobs"
    assert sum(via_llm.probabilities.values()) == pytest.approx(1.0)
    assert via_llm.distribution == pytest.approx(direct.distribution, abs=1e-3)


@pytest.mark.live
def test_live_openai_like_without_raw_recovers_the_sampled_token(local_server, local_llm):
    """Dropping ``raw`` leaves LlamaIndex's alternatives-only logprobs: the distribution must not change."""
    from llama_index.llms.openai_like import OpenAILike

    class NoRaw(OpenAILike):
        def chat(self, messages: Any, **kwargs: Any) -> ChatResponse:
            resp = super().chat(messages, **kwargs)
            return ChatResponse(message=resp.message, logprobs=resp.logprobs)

    no_raw = NoRaw(**local_llm.model_dump(include={"model", "api_base", "api_key", "is_chat_model", "logprobs",
                                                    "top_logprobs"}))
    a = JevSingleSelector.from_defaults(llm=no_raw).select(META, "Do cats sleep a lot?")
    b = JevSingleSelector.from_defaults(llm=local_llm).select(META, "Do cats sleep a lot?")
    assert a.method == "logprobs"
    assert a.distribution == pytest.approx(b.distribution, abs=1e-3)


@pytest.mark.live
def test_live_openai_like_async(local_llm):
    result = asyncio.run(JevSingleSelector.from_defaults(llm=local_llm).aselect(META, "Which airline flies to Oslo?"))
    assert result.method == "logprobs" and len(result.inds) == 1 and 0 <= result.ind < 3
    assert sum(result.probabilities.values()) == pytest.approx(1.0)
