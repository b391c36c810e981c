"""LangChain's own AutoModeMiddleware and ModelRouterMiddleware, driven by JevDecisionModel."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from jev_langchain import JevDecisionModel
from jev_shared import SystemOneClient

from .fakes import FIRST, SECOND, AsyncFakeOpenAI, FakeOpenAI, ScriptedChatModel

pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
agents = pytest.importorskip("langchain.agents", reason="LangChain's middleware needs the langchain package")
from langchain.agents.middleware import AutoModeMiddleware, ModelChoice, ModelRouterMiddleware  # noqa: E402

RAN: list[str] = []


@tool
def delete_repo(name: str) -> str:
    """Permanently delete a code repository."""
    RAN.append(name)
    return f"deleted {name}"


@pytest.fixture(autouse=True)
def clear_ran():
    RAN.clear()


def calling(name: str, args: dict) -> ScriptedChatModel:
    return ScriptedChatModel(replies=[AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c1",
                                                                 "type": "tool_call"}]), AIMessage("done")])


def auto_mode_agent(classifier: JevDecisionModel):
    return agents.create_agent(calling("delete_repo", {"name": "prod"}), [delete_repo],
                               middleware=[AutoModeMiddleware(tools=[delete_repo], classifier=classifier)])


def test_auto_mode_blocks_a_risky_call():
    fake = FakeOpenAI(FIRST)  # "true" far ahead: P(is_risky) ~ 0.95
    out = auto_mode_agent(JevDecisionModel(client=SystemOneClient(fake, model="fake", labels="letters"))).invoke(
        {"messages": [HumanMessage("clean up")]})
    [msg] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert msg.status == "error" and "blocked" in msg.content and RAN == []
    assert len(fake.wire) == 1
    prompt = str(fake.wire[0]["messages"])
    assert "clean up" in prompt and "delete_repo" in prompt and "Permanently delete" in prompt


def test_auto_mode_runs_a_safe_call_sync_and_async():
    out = auto_mode_agent(JevDecisionModel(client=SystemOneClient(FakeOpenAI(SECOND), model="fake",
                                                                  labels="letters"))).invoke(
        {"messages": [HumanMessage("delete prod, I am sure")]})
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["deleted prod"]
    from jev_shared import AsyncSystemOneClient

    fake = AsyncFakeOpenAI(SECOND)
    agent = auto_mode_agent(JevDecisionModel(client=AsyncSystemOneClient(fake, model="fake", labels="letters")))
    asyncio.run(agent.ainvoke({"messages": [HumanMessage("delete prod")]}))
    assert RAN == ["prod", "prod"] and len(fake.wire) == 1


def router_agent(window):
    fast, strong = ScriptedChatModel(replies=[AIMessage("fast answer")]), ScriptedChatModel(
        replies=[AIMessage("strong answer")])
    fake = FakeOpenAI(window)
    router = ModelRouterMiddleware(
        choices={"fast": ModelChoice(model=fast, criteria="Simple questions"),
                 "strong": ModelChoice(model=strong, criteria={"for": "hard reasoning", "cost": "high"})},
        instructions="Choose the cheapest model that can do the task.",
        classifier=JevDecisionModel(client=SystemOneClient(fake, model="fake", labels="letters")))
    return agents.create_agent(fast, [], middleware=[router]), fast, strong, fake


def test_model_router_picks_a_route_and_stores_it_in_state():
    agent, fast, strong, fake = router_agent(SECOND)
    out = agent.invoke({"messages": [HumanMessage("prove the Riemann hypothesis")]})
    assert out["model_route"].choice == "strong" and out["model_route"].probabilities["strong"] > 0.9
    assert out["messages"][-1].content == "strong answer" and fast.received == [] and len(strong.received) == 1
    prompt = str(fake.wire[0]["messages"])
    assert "prove the Riemann hypothesis" in prompt and "hard reasoning" in prompt


@pytest.mark.slow
@pytest.mark.live
def test_live_auto_mode_and_model_router_on_the_embedded_model(local_client):
    classifier = JevDecisionModel(client=local_client)
    out = auto_mode_agent(classifier).invoke({"messages": [HumanMessage("delete the prod repo")]})
    [msg] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert (msg.status == "error") == (RAN == [])  # blocked exactly when the tool did not run
    fast, strong = ScriptedChatModel(replies=[AIMessage("f")]), ScriptedChatModel(replies=[AIMessage("s")])
    # the 135M model often puts neither name in its window: take the stand-in rather than fail the run
    lenient = JevDecisionModel(client=local_client, on_no_signal="uniform")
    router = ModelRouterMiddleware(choices={"fast": ModelChoice(model=fast, criteria="Simple questions"),
                                            "strong": ModelChoice(model=strong, criteria="Hard reasoning")},
                                   instructions="Which model?", classifier=lenient)
    out = agents.create_agent(fast, [], middleware=[router]).invoke({"messages": [HumanMessage("hi")]})
    route = out["model_route"].choice
    assert route in {"fast", "strong"} and out["messages"][-1].content == route[0]
