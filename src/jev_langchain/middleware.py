"""Agent middleware that guards every tool call of a ``create_agent`` agent (needs ``langchain`` 1.x).

    agent = create_agent(model, tools, middleware=[JevToolGuardMiddleware(client, threshold=0.6)])

Each call is decided by a :class:`ToolCallGuard` with the tool's name, arguments and the last few
messages of the agent's conversation. A blocked call gets an error ``ToolMessage`` the agent reads
(the tool never runs), or, with ``on_block="raise"``, :class:`ToolCallBlocked` stops the agent. With
``block_below``, an unsure call pauses the agent for a person (LangGraph's interrupt; the agent needs
a checkpointer) and resumes with HumanInTheLoopMiddleware's answers (approve, edit, reject, respond).
Several instances guard different tools in one agent: each is named after its ``tool_names``.
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

from .guard import GuardDecision, ToolCallGuard


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

    @property
    def name(self) -> str:
        """Unique per guarded tool set, so guards of different tools can share one agent."""
        if self.tool_names is None:
            return type(self).__name__
        return f"{type(self).__name__}[{','.join(sorted(self.tool_names))}]"

    def _guarded(self, request: ToolCallRequest) -> bool:
        return self.tool_names is None or request.tool_call["name"] in self.tool_names

    @staticmethod
    def _conversation(request: ToolCallRequest) -> list[Any]:
        state = request.state
        messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
        return list(messages or [])

    def _ask(self, request: ToolCallRequest) -> dict[str, Any]:
        tool = request.tool
        return {"tool": request.tool_call["name"], "arguments": request.tool_call.get("args") or {},
                "conversation": self._conversation(request), "call_id": request.tool_call.get("id"),
                "description": tool.description if tool is not None else None,
                "config": getattr(request.runtime, "config", None)}

    def _settled(self, request: ToolCallRequest, decision: GuardDecision) -> ToolCallRequest | ToolMessage | str:
        """The request to run (with a reviewer's edited arguments, if any), or the call's result in its place."""
        outcome = self.guard.settle(decision, request.tool_call.get("id") or "")
        if not isinstance(outcome, dict):
            return outcome
        if outcome == (request.tool_call.get("args") or {}):
            return request
        return request.override(tool_call={**request.tool_call, "args": outcome})

    def wrap_tool_call(self, request: ToolCallRequest,
                       handler: Callable[[ToolCallRequest], Any]) -> ToolMessage | Any:
        if not self._guarded(request):
            return handler(request)
        settled = self._settled(request, self.guard.check(**self._ask(request)))
        return handler(settled) if isinstance(settled, ToolCallRequest) else settled

    async def awrap_tool_call(self, request: ToolCallRequest,
                              handler: Callable[[ToolCallRequest], Awaitable[Any]]) -> ToolMessage | Any:
        if not self._guarded(request):
            return await handler(request)
        settled = self._settled(request, await self.guard.acheck(**self._ask(request)))
        return await handler(settled) if isinstance(settled, ToolCallRequest) else settled


__all__ = ["JevToolGuardMiddleware"]
