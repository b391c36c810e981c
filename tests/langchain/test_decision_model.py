"""JevDecisionModel: LangChain's BaseDecisionModel over the engine, with LangChain's question types as they come."""

from __future__ import annotations

import asyncio
import json

import openai
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.decisions import (
    BaseDecisionModel,
    Box,
    Choice,
    ClassifierResponse,
    Noul,
    NoulCriteria,
    Score,
)
from langchain_core.messages import AIMessage, HumanMessage

from jev_langchain import JevDecisionModel
from jev_shared import AsyncSystemOneClient, InvalidQuestionError, LabelReadoutError, SystemOneClient

from .fakes import FIRST, SECOND, AsyncFakeOpenAI, FakeOpenAI

NO_LABEL = {"Sure": -0.2, " I": -1.5}


def model_over(window=FIRST) -> tuple[JevDecisionModel, openai.OpenAI]:
    fake = FakeOpenAI(window)
    return JevDecisionModel(client=SystemOneClient(fake, model="fake", labels="letters")), fake


def sent(fake: openai.OpenAI) -> str:
    return json.dumps([c["messages"] for c in fake.wire], ensure_ascii=False)


class Ends(BaseCallbackHandler):
    """Each run's start metadata and end outputs (the trace a callback handler sees)."""

    def __init__(self) -> None:
        self.starts: list[dict] = []
        self.outputs: list = []
        self.events: list = []

    def on_chain_start(self, serialized, inputs, *, run_id, metadata=None, **kw):
        self.starts.append({"name": kw.get("name"), "metadata": metadata or {}, "run_type": kw.get("run_type")})

    def on_chain_end(self, outputs, *, run_id, **kw):
        self.outputs.append(outputs)

    def on_custom_event(self, name, data, *, run_id, **kw):
        self.events.append((name, data))


def test_it_is_a_langchain_decision_model_and_answers_by_question_id():
    model, fake = model_over(FIRST)
    assert isinstance(model, BaseDecisionModel) and model.model == "fake"
    resp = model.invoke({"state": "I was charged twice",
                         "questions": {"team": Choice(instructions="Which team?",
                                                      criteria={"billing": "Money", "tech": "Bugs"}),
                                       "urgent": Noul(instructions="Is it urgent?")}})
    assert isinstance(resp, ClassifierResponse) and resp.model == "fake"
    assert resp.choices["team"].choice == "billing" and resp.choices["team"].confidence > 0.8
    assert resp.nouls["urgent"].noul > 0.9
    assert resp.usage == {"input_tokens": 20, "output_tokens": 2, "total_tokens": 22}
    assert len(fake.wire) == 2


def test_trace_carries_provider_model_usage_and_our_extras():
    model, _ = model_over(FIRST)
    ends = Ends()
    model.invoke({"state": "x", "questions": {"q": Noul(instructions="Is it fine?")}}, {"callbacks": [ends]})
    [start] = ends.starts
    assert start["metadata"]["ls_provider"] == "jev" and start["metadata"]["ls_model_name"] == "fake"
    assert start["run_type"] == "llm"
    assert ends.outputs[0].usage["input_tokens"] == 10
    [(name, data)] = ends.events
    assert name == "jev_decision" and data["debug"]["methods"] == {"q": "logprobs"} and data["n_calls"] == 1
    assert "passes" in data["debug"] and "labels_missing" in data["debug"]


def test_json_instructions_and_descriptions_none_or_json_go_out_as_text():
    model, fake = model_over(FIRST)
    model.invoke({"state": "x", "questions": {"team": Choice(
        instructions={"task": "route the ticket", "team_count": 2},
        criteria={"billing": None, "tech": {"handles": ["bugs", "outages"]}})}})
    prompt = sent(fake)
    assert '{\\"task\\":\\"route the ticket\\",\\"team_count\\":2}' in prompt
    assert '{\\"handles\\":[\\"bugs\\",\\"outages\\"]}' in prompt and "billing" in prompt


def test_noul_criteria_with_a_side_left_none_and_json_score_levels():
    model, fake = model_over(FIRST)
    resp = model.invoke({"state": "x", "questions": {
        "risky": Noul(instructions="Is it risky?", criteria=NoulCriteria(true="It deletes data", false=None)),
        "level": Score(instructions="How bad?", criteria=[{"level": "calm"}, "angry"])}})
    prompt = sent(fake)
    assert "It deletes data" in prompt and '{\\"level\\":\\"calm\\"}' in prompt
    assert resp.scores["level"].legend == {0: {"level": "calm"}, 1: "angry"}
    assert set(resp.scores["level"].probabilities) == {0, 1}


def test_a_box_question_and_media_are_refused_by_name_before_any_request():
    model, fake = model_over()
    with pytest.raises(InvalidQuestionError, match="Box question"):
        model.invoke({"state": "x", "questions": {"where": Box(instructions="Find the cat")}})
    image = {"type": "image", "base64": "AAAA", "mime_type": "image/png"}
    with pytest.raises(InvalidQuestionError, match=r"state\.messages\[0\]\.content\[1\]: a 'image' block"):
        model.invoke({"state": {"messages": [HumanMessage(content=[{"type": "text", "text": "hi"}, image])]},
                      "questions": {"q": Noul(instructions="ok?")}})
    with pytest.raises(InvalidQuestionError, match="'image' block"):
        model.invoke({"state": "x", "questions": {"q": Noul(instructions=["look", image])}})
    assert fake.wire == []


def test_state_as_text_message_or_json_with_messages_at_any_depth():
    model, fake = model_over()
    q = {"q": Noul(instructions="ok?")}
    model.invoke({"state": HumanMessage("MESSAGE-ROOT"), "questions": q})
    model.invoke({"state": {"messages": [HumanMessage("delete my temp files"),
                                         AIMessage("", tool_calls=[{"name": "rm", "args": {"path": "/tmp"}, "id": "1"}])],
                            "tool_call": {"id": "1", "name": "rm", "args": {"path": "/tmp"}}},
                  "questions": q})
    first, second = (json.dumps(c["messages"]) for c in fake.wire)
    assert "MESSAGE-ROOT" in first
    assert "delete my temp files" in second and '\\"tool_calls\\"' in second and '\\"/tmp\\"' in second


def test_async_is_native_with_an_async_client():
    fake = AsyncFakeOpenAI(SECOND)
    model = JevDecisionModel(client=AsyncSystemOneClient(fake, model="fake", labels="letters"))
    resp = asyncio.run(model.ainvoke({"state": "x", "questions": {"q": Noul(instructions="ok?")}}))
    assert resp.nouls["q"].noul < 0.1 and len(fake.wire) == 1


def test_no_signal_raises_by_default_or_returns_the_uniform_stand_in():
    model, _ = model_over(NO_LABEL)
    with pytest.raises(LabelReadoutError, match="no signal"):
        model.invoke({"state": "x", "questions": {"q": Noul(instructions="ok?")}})
    lenient = JevDecisionModel(client=SystemOneClient(FakeOpenAI(NO_LABEL), model="fake", labels="letters"),
                               on_no_signal="uniform")
    assert lenient.invoke({"state": "x", "questions": {"q": Noul(instructions="ok?")}}).nouls["q"].noul == 0.5


def test_misuse_is_refused():
    with pytest.raises(TypeError, match="JevDecisionModel: client must be"):
        JevDecisionModel(client=FakeOpenAI())
    with pytest.raises(ValueError, match="on_no_signal"):
        JevDecisionModel(client=model_over()[0].jev_pair.sync, on_no_signal="ignore")


@pytest.mark.slow
@pytest.mark.live
def test_live_decision_model_on_the_embedded_model(local_client):
    model = JevDecisionModel(client=local_client)
    resp = model.invoke({"state": {"messages": [HumanMessage("What is 2+2?")]},
                         "questions": {"team": Choice(instructions="Which team?", criteria={"math": None, "art": None}),
                                       "polite": Noul(instructions="Is the message polite?")}})
    assert set(resp.answers) == {"team", "polite"} and resp.choices["team"].choice in {"math", "art"}
    assert sum(resp.choices["team"].probabilities.values()) == pytest.approx(1.0)
    assert 0.0 <= resp.nouls["polite"].noul <= 1.0 and resp.usage["input_tokens"] > 0
