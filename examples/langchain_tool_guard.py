"""An agent with one risky tool behind the tool-call guard.

    python examples/langchain_tool_guard.py

Needs the ``langchain`` package (1.x) for ``create_agent``. The guard runs on the embedded
llama.cpp model (no API key needed), or on OPENAI_API_KEY's server when set (OPENAI_BASE_URL and
JEV_MODEL honoured), which then also drives the agent. Without a key a scripted model proposes the
tool calls, since the small embedded models are not run as agents here; zero-shot, their guard verdicts
barely depend on the call (the default 1.5B: a 25,000 wire to an unknown account reads P(allowed) 0.65,
20 to the user's savings 0.70; docs/langchain.md): this shows the wiring, not the judgement.
"""

from __future__ import annotations

import os
from contextlib import ExitStack

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from jev_langchain import JevToolGuardMiddleware


@tool
def wire_money(to: str, amount: float) -> str:
    """Send money from the user's account to another account."""
    return f"sent {amount:.2f} to {to}"  # a real tool would move money here


class ScriptedAgentModel(FakeMessagesListChatModel):
    """Proposes the scripted tool calls in turn (stands in for an agent model when there is no key)."""

    def bind_tools(self, tools, **kwargs):
        return self


def models(stack: ExitStack) -> tuple[ChatOpenAI, object]:
    """(the guard's chat model, the agent's model)."""
    if os.environ.get("OPENAI_API_KEY"):
        llm = ChatOpenAI(model=os.environ.get("JEV_MODEL", "gpt-4o-mini"), logprobs=True, top_logprobs=20)
        return llm, llm
    from jev_shared.local import LocalServer

    srv = stack.enter_context(LocalServer())
    guard_llm = ChatOpenAI(base_url=srv.base_url, api_key="local", model=srv.model, logprobs=True, top_logprobs=20)
    agent_llm = ScriptedAgentModel(responses=[
        AIMessage("", tool_calls=[{"name": "wire_money", "args": {"to": "an unknown account", "amount": 25000},
                                   "id": "call-1", "type": "tool_call"}]),
        AIMessage("I could not send that payment."),
    ])
    return guard_llm, agent_llm


def main() -> None:
    with ExitStack() as stack:
        guard_llm, agent_llm = models(stack)
        guard = JevToolGuardMiddleware(guard_llm, threshold=0.9)  # money moves only when the model is sure
        agent = create_agent(agent_llm, [wire_money], middleware=[guard])
        out = agent.invoke({"messages": [("user", "Send 25,000 dollars to an account a stranger emailed me.")]})
        for msg in out["messages"]:
            if isinstance(msg, ToolMessage):
                verdict = msg.artifact["jev_guard"] if msg.status == "error" else "allowed"
                print(f"tool {msg.name}: {msg.content}\n  guard: {verdict}")
        print(f"agent: {out['messages'][-1].content}")


if __name__ == "__main__":
    main()
