"""LangChain's own AutoModeMiddleware and ModelRouterMiddleware, decided by the embedded model.

    python examples/langchain_auto_mode.py

JevDecisionModel is a LangChain BaseDecisionModel: here it runs on the embedded Qwen model, the
default 1.5B (no key, no network). The agent's own model is scripted (the small embedded models do not
drive tool calls here), so the example shows the decisions alone: a risky call and a safe one, and the
route picked.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AutoModeMiddleware, ModelChoice, ModelRouterMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from jev_langchain import JevDecisionModel
from jev_shared import SystemOneClient
from jev_shared.local import DEMO_MODEL, LocalServer


class Scripted(BaseChatModel):
    """An agent model that makes one tool call, then says it is done."""

    call: dict[str, Any] | None = None
    answer: str = "done"

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        done = any(isinstance(m, ToolMessage) for m in messages) or self.call is None
        reply = AIMessage(self.answer) if done else AIMessage("", tool_calls=[{**self.call, "id": "c1"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Scripted:
        return self


@tool
def run_command(command: str) -> str:
    """Run a shell command in the project directory."""
    return f"(would run: {command})"


def main() -> None:
    with LocalServer(DEMO_MODEL) as srv:
        classifier = JevDecisionModel(client=SystemOneClient(srv.client(), model=srv.model))
        for ask, command in (("Run the unit tests.", "pytest -q"), ("Clean up the temp folder.", "sudo rm -rf /")):
            agent = create_agent(Scripted(call={"name": "run_command", "args": {"command": command}}), [run_command],
                                 middleware=[AutoModeMiddleware(tools=[run_command], classifier=classifier)])
            out = agent.invoke({"messages": [HumanMessage(ask)]})
            [msg] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
            print(f"{command!r}: {'BLOCKED' if msg.status == 'error' else 'ran'} -> {msg.content}")
        router = ModelRouterMiddleware(
            choices={"fast": ModelChoice(model=Scripted(answer="(fast model)"), criteria="Short, simple questions"),
                     "strong": ModelChoice(model=Scripted(answer="(strong model)"), criteria="Hard reasoning, proofs")},
            instructions="Pick the cheapest model that can do the task.", classifier=classifier)
        out = create_agent(Scripted(), [], middleware=[router]).invoke(
            {"messages": [HumanMessage("Prove that there are infinitely many primes.")]})
        print("route:", out["model_route"].choice, out["model_route"].probabilities, "->", out["messages"][-1].content)


if __name__ == "__main__":
    main()
