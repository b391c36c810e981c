"""GuardedTool / guard_tool: one tool behind a :class:`ToolCallGuard`, otherwise the wrapped tool itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from pydantic import ConfigDict, model_validator

from ._core import child_config
from .guard import ToolCallGuard

#: The tool call id of the call in progress, so a guarded tool can hand its wrapped tool the full call.
_CALL_ID: ContextVar[str | None] = ContextVar("jev_guard_tool_call_id", default=None)
#: What a guarded tool takes over from the tool it wraps, unless given.
COPIED = ("name", "description", "args_schema", "return_direct", "response_format", "tags", "metadata",
          "handle_tool_error", "handle_validation_error")
#: The call id a wrapped ``content_and_artifact`` tool is given when the call came without one.
_LOCAL_ID = "jev-guard-local"


class GuardedTool(BaseTool):
    """A tool that asks its :class:`ToolCallGuard` before every call; otherwise the wrapped tool itself.

    ``GuardedTool(tool=..., guard=...)`` takes the name, description, argument schema, response
    format, tags, metadata and error handling of ``tool``. A blocked call returns the guard's message
    (an error ToolMessage for a tool call) and never runs ``tool``; an unsure one asks a person.
    ``conversation``, when given, returns the recent messages the guard should see.
    """

    tool: BaseTool
    guard: ToolCallGuard
    conversation: Callable[[], Sequence[Any]] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def __init__(self, *, tool: BaseTool, guard: ToolCallGuard, conversation: Callable[[], Sequence[Any]] | None = None,
                 **kwargs: Any) -> None:
        # name, description and the rest come from ``tool`` (``_copy_from_tool``): the signature says so to type checkers
        super().__init__(tool=tool, guard=guard, conversation=conversation, **kwargs)

    @model_validator(mode="before")
    @classmethod
    def _copy_from_tool(cls, data: Any) -> Any:
        inner = data.get("tool") if isinstance(data, dict) else None
        if isinstance(inner, BaseTool):
            data = {**{f: getattr(inner, f) for f in COPIED if getattr(inner, f, None) is not None}, **data}
        return data

    def run(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        token = _CALL_ID.set(tool_call_id)
        try:
            return super().run(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _CALL_ID.reset(token)

    async def arun(self, tool_input: Any, *args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
        token = _CALL_ID.set(tool_call_id)
        try:
            return await super().arun(tool_input, *args, tool_call_id=tool_call_id, **kwargs)
        finally:
            _CALL_ID.reset(token)

    def _run(self, *args: Any, config: RunnableConfig, run_manager: CallbackManagerForToolRun | None = None,
             **kwargs: Any) -> Any:
        decision = self.guard.check(self.name, _arguments(args, kwargs), self._recent(), description=self.description,
                                    config=child_config(config, run_manager, "jev:decide"), call_id=_CALL_ID.get())
        outcome = self.guard.settle(decision, _CALL_ID.get())
        if not isinstance(outcome, dict):
            return self._shaped(outcome, decision)
        return self._shaped(self.tool.invoke(self._inner_input(args, outcome),
                                             child_config(config, run_manager, "guard:allowed")))

    async def _arun(self, *args: Any, config: RunnableConfig,
                    run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any) -> Any:
        decision = await self.guard.acheck(self.name, _arguments(args, kwargs), self._recent(),
                                           description=self.description, call_id=_CALL_ID.get(),
                                           config=child_config(config, run_manager, "jev:decide"))
        outcome = self.guard.settle(decision, _CALL_ID.get())
        if not isinstance(outcome, dict):
            return self._shaped(outcome, decision)
        return self._shaped(await self.tool.ainvoke(self._inner_input(args, outcome),
                                                    child_config(config, run_manager, "guard:allowed")))

    def _recent(self) -> Sequence[Any] | None:
        return self.conversation() if self.conversation is not None else None

    def _inner_input(self, args: tuple[Any, ...], arguments: dict[str, Any]) -> Any:
        """The wrapped tool's input: the full tool call when there is one, so it returns its own ToolMessage."""
        if args and arguments == {"input": args[0]}:
            return args[0]
        call_id = _CALL_ID.get()
        if call_id is None and self.response_format != "content_and_artifact":
            return arguments
        return {"type": "tool_call", "name": self.tool.name, "args": arguments, "id": call_id or _LOCAL_ID}

    def _shaped(self, result: Any, decision: Any = None) -> Any:
        """The result in this tool's ``response_format``: a content-and-artifact tool returns a pair."""
        if self.response_format != "content_and_artifact":
            return result
        if isinstance(result, ToolMessage) and _CALL_ID.get() is None:
            return result.content, result.artifact
        if isinstance(result, ToolMessage):
            return result, None
        return result, ({"jev_guard": decision.model_dump(mode="json")} if decision is not None else None)


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {"input": args[0]} if args else kwargs


def guard_tool(tool: BaseTool, client: Any = None, *, guard: ToolCallGuard | None = None,
               conversation: Callable[[], Sequence[Any]] | None = None, **guard_options: Any) -> GuardedTool:
    """``tool`` behind a guard: same name, description, schema, response format and error handling.

    Pass ``client`` with the :class:`ToolCallGuard` options (``instructions``, ``criteria``,
    ``threshold``, ``block_below``, ``n_messages``, ``examples``, ...) or a ready ``guard`` shared
    between tools. Tools that take injected arguments (``InjectedState``, ``ToolRuntime``) are best
    guarded with the agent middleware, which wraps the call outside the tool.
    """
    if not isinstance(tool, BaseTool):
        raise TypeError(f"tool: expected a LangChain BaseTool (decorate a function with @tool), got "
                        f"{type(tool).__name__}")
    if (client is None) == (guard is None):
        raise ValueError("guard_tool: pass either client=... (with the guard options) or guard=ToolCallGuard(...)")
    if guard is not None and guard_options:
        raise ValueError(f"guard_tool: guard options {sorted(guard_options)} go to ToolCallGuard(...) when a "
                         "guard is given")
    if conversation is not None and not callable(conversation):
        raise TypeError(f"conversation: expected a callable returning recent messages, got {type(conversation).__name__}")
    return GuardedTool(tool=tool, guard=guard or ToolCallGuard(client, **guard_options), conversation=conversation)


__all__ = ["GuardedTool", "guard_tool"]
