"""JevToolGuardMiddleware: every tool call of a create_agent agent is asked about first."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from jev_shared import SystemOneClient

from .fakes import FIRST, SECOND, FakeOpenAI, ScriptedChatModel, fake_async_client, fake_client

agents = pytest.importorskip("langchain.agents", reason="the agent middleware needs the langchain package")
from jev_langchain import JevToolGuardMiddleware, ToolCallBlocked, ToolCallGuard  # noqa: E402

WIRED: list[dict] = []


@tool
def wire_money(to: str, amount: float) -> str:
    """Send money to an account."""
    WIRED.append({"to": to, "amount": amount})
    return f"sent {amount} to {to}"


@tool
def get_balance() -> str:
    """Read the account balance."""
    return "balance: 100"


@pytest.fixture(autouse=True)
def clear_wired():
    WIRED.clear()


def scripted(*calls: tuple[str, dict]) -> ScriptedChatModel:
    """An agent model that makes the given tool calls, then answers 'done'."""
    tool_calls = [{"name": n, "args": a, "id": f"call-{i}", "type": "tool_call"} for i, (n, a) in enumerate(calls)]
    return ScriptedChatModel(replies=[AIMessage("", tool_calls=tool_calls), AIMessage("done")])


def run_agent(model, middleware, prompt: str = "pay Bob 5000") -> list:
    agent = agents.create_agent(model, [wire_money, get_balance], middleware=[middleware])
    return agent.invoke({"messages": [HumanMessage(prompt)]})["messages"]


def tool_messages(messages: list) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


def test_blocked_call_returns_an_error_message_the_agent_reads():
    model = scripted(("wire_money", {"to": "bob", "amount": 5000}))
    messages = run_agent(model, JevToolGuardMiddleware(fake_client(SECOND)))
    [msg] = tool_messages(messages)
    assert msg.status == "error" and "wire_money" in msg.content and "blocked" in msg.content
    assert msg.tool_call_id == "call-0" and msg.artifact["jev_guard"]["allowed"] is False
    assert WIRED == []
    assert messages[-1].content == "done"
    assert any(isinstance(m, ToolMessage) and "blocked" in m.content for m in model.received[-1]["messages"])


def test_allowed_call_runs_the_tool():
    messages = run_agent(scripted(("wire_money", {"to": "bob", "amount": 5})), JevToolGuardMiddleware(fake_client(FIRST)))
    assert tool_messages(messages)[0].content == "sent 5.0 to bob"
    assert WIRED == [{"to": "bob", "amount": 5.0}]


def test_the_guard_sees_the_agent_conversation():
    fake = FakeOpenAI(FIRST)
    run_agent(scripted(("wire_money", {"to": "bob", "amount": 5})),
              JevToolGuardMiddleware(SystemOneClient(fake, model="fake", labels="letters")), prompt="PAY-BOB-PLEASE")
    prompt = str(fake.wire[0]["messages"])
    assert "PAY-BOB-PLEASE" in prompt and "wire_money" in prompt


def test_tool_names_limits_which_calls_are_guarded():
    fake = FakeOpenAI(SECOND)
    middleware = JevToolGuardMiddleware(SystemOneClient(fake, model="fake", labels="letters"), tool_names=["wire_money"])
    messages = run_agent(scripted(("get_balance", {}), ("wire_money", {"to": "eve", "amount": 1})), middleware)
    by_id = {m.tool_call_id: m for m in tool_messages(messages)}
    assert by_id["call-0"].content == "balance: 100"
    assert by_id["call-1"].status == "error" and WIRED == []
    assert len(fake.wire) == 1  # only wire_money was asked about


def test_on_block_raise_stops_the_agent():
    model = scripted(("wire_money", {"to": "bob", "amount": 5000}))
    with pytest.raises(ToolCallBlocked):
        run_agent(model, JevToolGuardMiddleware(guard=ToolCallGuard(fake_client(SECOND), on_block="raise")))
    assert WIRED == []


def test_async_agent_is_guarded_too():
    agent = agents.create_agent(scripted(("wire_money", {"to": "bob", "amount": 9})), [wire_money],
                                middleware=[JevToolGuardMiddleware(fake_async_client(SECOND))])
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("pay")]}))
    assert tool_messages(out["messages"])[0].status == "error" and WIRED == []


def test_the_decision_is_in_the_trace(recorder):
    agent = agents.create_agent(scripted(("wire_money", {"to": "bob", "amount": 1})), [wire_money],
                                middleware=[JevToolGuardMiddleware(fake_client(SECOND))])
    agent.invoke({"messages": [HumanMessage("pay")]}, {"callbacks": [recorder]})
    decide = recorder.one("jev_guard")
    assert decide["parent"] is not None
    [event] = [e for e in recorder.events if e["name"] == "jev_guard"]
    assert event["data"]["allowed"] is False and event["data"]["tool"] == "wire_money"


def test_middleware_rejects_misuse():
    with pytest.raises(ValueError, match="either client"):
        JevToolGuardMiddleware()
    with pytest.raises(ValueError, match="guard options"):
        JevToolGuardMiddleware(guard=ToolCallGuard(fake_client()), threshold=0.3)
    with pytest.raises(TypeError, match="tool_names"):
        JevToolGuardMiddleware(fake_client(), tool_names="wire_money")
