"""jev_langchain: typed decisions as LangChain Runnables.

- :class:`JevRouter` picks the branch that handles its input and invokes it.
- :class:`JevGate` passes its input through, or blocks it, on a yes/no question.
- :func:`guard_tool` / ``JevToolGuardMiddleware`` ask before every tool call of an agent.
- :func:`jev_client_from_chat_model` makes the user's own chat model the engine's backend.

``JevToolGuardMiddleware`` needs the ``langchain`` package and is imported on first use.
"""

from typing import Any

from .chat_model import (
    AsyncChatModelClient,
    ChatModelClient,
    jev_async_client_from_chat_model,
    jev_client_from_chat_model,
)
from .errors import GateBlocked, RouteConfidenceError, ToolCallBlocked
from .gate import GateDecision, JevGate
from .guard import GuardDecision, GuardedTool, ToolCallGuard, guard_tool
from .router import JevRouter, Route, RouteDecision

__all__ = [
    "JevRouter", "RouteDecision", "Route", "RouteConfidenceError",
    "JevGate", "GateDecision", "GateBlocked",
    "ToolCallGuard", "GuardDecision", "GuardedTool", "guard_tool", "ToolCallBlocked", "JevToolGuardMiddleware",
    "ChatModelClient", "AsyncChatModelClient", "jev_client_from_chat_model", "jev_async_client_from_chat_model",
]


def __getattr__(name: str) -> Any:
    """Import the agent middleware lazily: only it needs the ``langchain`` package."""
    if name == "JevToolGuardMiddleware":
        from .middleware import JevToolGuardMiddleware

        return JevToolGuardMiddleware
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
