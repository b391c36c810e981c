"""The "ask a human" band: an unsure guard or router pauses the graph (LangGraph's interrupt) for a person."""

from __future__ import annotations

import math
from typing import TypedDict

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from jev_langchain import JevRouter, ToolCallGuard
from jev_shared import SystemOneClient

from .fakes import FIRST, SECOND, TIE, FakeOpenAI, ScriptedChatModel, fake_client

agents = pytest.importorskip("langchain.agents", reason="the agent middleware needs the langchain package")
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402
from langgraph.types import Command  # noqa: E402

from jev_langchain import JevToolGuardMiddleware  # noqa: E402

RAN: list[dict] = []
P_TIE = 1 / (1 + math.exp(-0.01))  # P(true) for the TIE window: ~0.5025


@tool
def refund(amount: int) -> str:
    """Refund a customer."""
    RAN.append({"amount": amount})
    return f"refunded {amount}"


@pytest.fixture(autouse=True)
def clear_ran():
    RAN.clear()


def agent_with(middleware):
    model = ScriptedChatModel(replies=[AIMessage("", tool_calls=[{"name": "refund", "args": {"amount": 90},
                                                                  "id": "c1", "type": "tool_call"}]),
                                       AIMessage("done")])
    return agents.create_agent(model, [refund], middleware=[middleware], checkpointer=InMemorySaver())


def test_an_unsure_call_pauses_for_a_person_and_runs_once_approved():
    fake = FakeOpenAI(TIE)
    guard = ToolCallGuard(SystemOneClient(fake, model="fake", labels="letters"), threshold=0.9, block_below=0.2)
    agent, cfg = agent_with(JevToolGuardMiddleware(guard=guard)), {"configurable": {"thread_id": "t1"}}
    paused = agent.invoke({"messages": [HumanMessage("refund the order")]}, cfg)
    [pending] = paused["__interrupt__"]
    assert pending.value["type"] == "tool_approval" and pending.value["name"] == "refund"
    assert pending.value["args"] == {"amount": 90} and pending.value["jev_guard"]["outcome"] == "review"
    assert RAN == []
    done = agent.invoke(Command(resume={"type": "edit", "edited_action": {"name": "refund", "args": {"amount": 9}}}),
                        cfg)
    assert RAN == [{"amount": 9}] and done["messages"][-1].content == "done"
    assert len(fake.wire) == 1  # the resumed run reuses the decision it paused on


def test_a_rejected_call_never_runs_and_sure_calls_never_pause():
    guard = ToolCallGuard(fake_client(TIE), threshold=0.9, block_below=0.2)
    agent, cfg = agent_with(JevToolGuardMiddleware(guard=guard)), {"configurable": {"thread_id": "t2"}}
    agent.invoke({"messages": [HumanMessage("refund")]}, cfg)
    out = agent.invoke(Command(resume={"type": "reject", "message": "too much"}), cfg)
    [msg] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert msg.status == "error" and "too much" in msg.content and RAN == []
    for window, ran in ((FIRST, True), (SECOND, False)):  # P ~ 0.95 runs, P ~ 0.05 blocks: no pause either way
        RAN.clear()
        sure = agent_with(JevToolGuardMiddleware(guard=ToolCallGuard(fake_client(window), threshold=0.9,
                                                                     block_below=0.2)))
        out = sure.invoke({"messages": [HumanMessage("refund")]}, {"configurable": {"thread_id": f"s{ran}"}})
        assert "__interrupt__" not in out and bool(RAN) == ran


def test_the_guard_is_a_when_predicate_for_human_in_the_loop_middleware():
    from langchain.agents.middleware import HumanInTheLoopMiddleware

    fake = FakeOpenAI(TIE)
    guard = ToolCallGuard(SystemOneClient(fake, model="fake", labels="letters"), threshold=0.9)
    hitl = HumanInTheLoopMiddleware(interrupt_on={"refund": {"allowed_decisions": ["approve", "reject"],
                                                             "when": guard.when}})
    agent, cfg = agent_with(hitl), {"configurable": {"thread_id": "t3"}}
    paused = agent.invoke({"messages": [HumanMessage("refund")]}, cfg)
    assert paused["__interrupt__"] and RAN == []
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), cfg)
    assert RAN == [{"amount": 90}] and len(fake.wire) == 1  # the predicate answered alike on resume
    sure = ToolCallGuard(fake_client(FIRST), threshold=0.9)
    auto = agent_with(HumanInTheLoopMiddleware(interrupt_on={"refund": {"allowed_decisions": ["approve"],
                                                                        "when": sure.when}}))
    assert "__interrupt__" not in auto.invoke({"messages": [HumanMessage("refund")]},
                                              {"configurable": {"thread_id": "t4"}})


def test_an_unsure_router_asks_a_person_inside_a_graph():
    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        text: str
        route: str

    router = JevRouter(fake_client(TIE), {"billing": "Money", "tech": "Bugs"}, ask_human_below=0.8,
                       state=lambda s: s["text"])
    graph = StateGraph(State)
    graph.add_node("route", lambda s: {"route": router.decide(s).route})
    graph.add_edge(START, "route")
    graph.add_edge("route", END)
    app, cfg = graph.compile(checkpointer=InMemorySaver()), {"configurable": {"thread_id": "r1"}}
    paused = app.invoke({"text": "hmm"}, cfg)
    [pending] = paused["__interrupt__"]
    assert pending.value["type"] == "route_review" and pending.value["routes"] == ["billing", "tech"]
    assert app.invoke(Command(resume="tech"), cfg)["route"] == "tech"
    sure = JevRouter(fake_client(FIRST), {"billing": "Money", "tech": "Bugs"}, ask_human_below=0.8)
    assert sure.decide("x").route == "billing" and not sure.decide("x").reviewed


def test_the_band_outside_a_graph_says_what_it_needs():
    with pytest.raises(RuntimeError, match="pauses a LangGraph graph"):
        JevRouter(fake_client(TIE), {"a": "A", "b": "B"}, ask_human_below=0.8).decide("x")
    with pytest.raises(ValueError, match="block_below: must be <= threshold"):
        ToolCallGuard(fake_client(), threshold=0.5, block_below=0.7)
    assert P_TIE < 0.9
