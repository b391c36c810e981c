"""Agent middleware that guards every tool call of a ``create_agent`` agent (needs ``langchain`` 1.x).

    agent = create_agent(model, tools, middleware=[JevToolGuardMiddleware(client, threshold=0.6)])

Each call is decided by a :class:`ToolCallGuard` with the tool's name, arguments and the last few
messages of the agent's conversation. A blocked call gets an error ``ToolMessage`` the agent reads
(the tool never runs), or, with ``on_block="raise"``, :class:`ToolCallBlocked` stops the agent.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection
from typing import Any

try:
    from langchain.agents.middleware import AgentMiddleware, ToolCallRequest
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "JevToolGuardMiddleware needs the langchain package (1.x): pip install 'langchain>=1.0'; "
        "guard single tools with jev_langchain.guard_tool without it"
    ) from exc
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig

from .guard import ToolCallGuard


class JevToolGuardMiddleware(AgentMiddleware):
    """Ask a :class:`ToolCallGuard` before every tool call (or those named in ``tool_names``).

    Pass ``client`` with the guard options (``instructions``, ``threshold``, ``on_block``,
    ``on_error``, ``block_message``, ``n_messages``, ...) or a ready ``guard``.
    """

    def __init__(self, client: Any = None, *, guard: ToolCallGuard | None = None,
                 tool_names: Collection[str] | None = None, **guard_options: Any) -> None:
        super().__init__()
        if (client is None) == (guard is None):
            raise ValueError("JevToolGuardMiddleware: pass either client=... (with the guard options) or "
                             "guard=ToolCallGuard(...)")
        if guard is not None and guard_options:
            raise ValueError(f"JevToolGuardMiddleware: guard options {sorted(guard_options)} go to "
                             "ToolCallGuard(...) when a guard is given")
        if tool_names is not None and (isinstance(tool_names, str) or not all(isinstance(n, str) for n in tool_names)):
            raise TypeError(f"tool_names: expected a collection of tool names, got {tool_names!r}")
        self.guard = guard if guard is not None else ToolCallGuard(client, **guard_options)
        self.tool_names = frozenset(tool_names) if tool_names is not None else None

    def _guarded(self, request: ToolCallRequest) -> bool:
        return self.tool_names is None or request.tool_call["name"] in self.tool_names

    @staticmethod
    def _conversation(request: ToolCallRequest) -> list[Any]:
        state = request.state
        messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
        return list(messages or [])

    @staticmethod
    def _config(request: ToolCallRequest) -> RunnableConfig | None:
        return getattr(request.runtime, "config", None)

    def _ask(self, request: ToolCallRequest) -> dict[str, Any]:
        tool = request.tool
        return {"tool": request.tool_call["name"], "arguments": request.tool_call.get("args") or {},
                "conversation": self._conversation(request),
                "description": tool.description if tool is not None else None, "config": self._config(request)}

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], Any]) -> ToolMessage | Any:
        if not self._guarded(request):
            return handler(request)
        decision = self.guard.check(**self._ask(request))
        if decision.allowed:
            return handler(request)
        return self.guard.refusal(decision, request.tool_call.get("id") or "")

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[Any]]) -> ToolMessage | Any:
        if not self._guarded(request):
            return await handler(request)
        decision = await self.guard.acheck(**self._ask(request))
        if decision.allowed:
            return await handler(request)
        return self.guard.refusal(decision, request.tool_call.get("id") or "")


__all__ = ["JevToolGuardMiddleware"]
