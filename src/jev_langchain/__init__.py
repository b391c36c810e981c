"""jev_langchain: typed decisions as LangChain Runnables, and as LangChain's own decision model.

- :class:`JevDecisionModel` is a ``langchain_core.decisions.BaseDecisionModel``: LangChain's
  ``AutoModeMiddleware`` and ``ModelRouterMiddleware`` run on the engine through it.
- :class:`JevRouter` picks the branch that handles its input and invokes it (or is a LangGraph edge).
- :class:`JevGate` passes its input through, or blocks it, on a yes/no question.
- :func:`guard_tool` / ``JevToolGuardMiddleware`` ask before every tool call of an agent; an unsure
  call can go to a person (LangGraph's interrupt).
- :func:`jev_client_from_chat_model` makes the user's own chat model the engine's backend.

The doors take a ``SystemOneClient``, an ``AsyncSystemOneClient``, a LangChain chat model (also one
wrapped by ``.with_retry()``, ``.with_fallbacks()`` or ``.configurable_fields()``) or any
``BaseDecisionModel``. The router, the gate and the decision model serialise as LangChain objects
(``dumpd`` / ``load``); they and the guard pickle (docs/langchain.md, "Serialising and pickling"). ``JevToolGuardMiddleware`` needs the ``langchain`` package and is imported on first use.
"""

import importlib.util
from typing import TYPE_CHECKING, Any

if importlib.util.find_spec("langchain_core") is None:  # one actionable line instead of a traceback from deep inside
    raise ImportError("jev_langchain needs langchain-core: pip install -e '.[langchain]' from a checkout")

from .chat_model import (
    AsyncChatModelClient,
    ChatModelClient,
    jev_async_client_from_chat_model,
    jev_client_from_chat_model,
)
from .decision_model import JevDecisionModel
from .errors import GateBlocked, RouteConfidenceError, ToolCallBlocked
from .gate import GateDecision, JevGate
from .guard import GuardDecision, ToolCallGuard
from .guarded_tool import GuardedTool, guard_tool
from .router import JevRouter, Route, RouteDecision

if TYPE_CHECKING:  # imported on first use at run time (below): it needs the langchain package
    from .middleware import JevToolGuardMiddleware

__all__ = [
    "JevDecisionModel",
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
