"""Tool-call guard: before a tool runs, ask whether this call (tool, arguments, recent turns) is allowed.

:class:`ToolCallGuard` holds the decision; :func:`guard_tool` puts it in front of one tool, and
:class:`jev_langchain.middleware.JevToolGuardMiddleware` in front of every tool of a ``create_agent``
agent. A blocked call never runs the tool: the agent reads a message saying so (or, with
``on_block="raise"``, :class:`ToolCallBlocked` stops the run). Each decision is a ``jev_guard`` run
in the trace (its output says allowed or blocked, and the probability) and a ``jev_guard`` custom event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForToolRun, CallbackManagerForToolRun
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict

from jev_shared import Example, Noul, NoulAnswer, SystemOneResponse

from ._core import (
    DECISION_ERRORS,
    ON_ERROR,
    Backend,
    aannounce,
    announce,
    check_noul_criteria,
    check_noul_examples,
    check_option,
    check_text,
    check_threshold,
    safe_reason,
    signal_or_raise,
    step,
)
from .errors import ToolCallBlocked

DEFAULT_GUARD_INSTRUCTIONS = (
    "This tool call should run: it does what the user asked for, and its arguments do nothing harmful, "
    "destructive or irreversible that the user did not clearly ask for."
)
DEFAULT_BLOCK_MESSAGE = (
    "The call to '{tool}' was blocked by a guard ({reason}); the tool did not run. Do not retry it; tell the "
    "user that this action was not allowed."
)
ON_BLOCK = ("message", "raise")
QUESTION_ID = "allowed"
#: The tool call id of the call in progress, so a guarded tool can hand its wrapped tool the full call.
_CALL_ID: ContextVar[str | None] = ContextVar("jev_guard_tool_call_id", default=None)


class GuardDecision(BaseModel):
    """One guarded call: allowed or blocked, on what probability; ``error`` when the decision failed."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    allowed: bool
    #: P(the call should run); None when the decision failed.
    probability: float | None
    threshold: float
    error: str | None = None


class ToolCallGuard:
    """Decides whether one tool call may run; shared by :func:`guard_tool` and the agent middleware.

    ``instructions`` is the statement that must hold for a call to run; the call runs when
    P(true) >= ``threshold``. ``on_block``: ``"message"`` (the agent reads ``block_message``,
    formatted with ``{tool}`` and ``{reason}``) or ``"raise"`` (:class:`ToolCallBlocked`).
    ``on_error``: a failed decision ``"block"``s (default), ``"allow"``s or ``"raise"``s.
    The last ``n_messages`` turns of the conversation, when known, are shown to the model.
    """

    def __init__(self, client: Any, *, instructions: str = DEFAULT_GUARD_INSTRUCTIONS,
                 criteria: dict[str, str] | None = None, threshold: float = 0.5, on_block: str = "message",
                 on_error: str = "block", block_message: str = DEFAULT_BLOCK_MESSAGE, n_messages: int = 6,
                 examples: Sequence[Example] | None = None) -> None:
        self.instructions = check_text("instructions", instructions)
        self.threshold = check_threshold("threshold", threshold)
        self.on_block = check_option("on_block", on_block, ON_BLOCK)
        self.on_error = check_option("on_error", on_error, ON_ERROR)
        self.block_message = check_text("block_message", block_message)
        try:
            block_message.format(tool="t", reason="r")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"block_message: only {{tool}} and {{reason}} can be filled in, got {exc!r}") from None
        if isinstance(n_messages, bool) or not isinstance(n_messages, int) or n_messages < 0:
            raise ValueError(f"n_messages: must be an integer >= 0, got {n_messages!r}")
        self.n_messages = n_messages
        self.question = Noul(instructions=instructions, criteria=check_noul_criteria(criteria),
                             examples=check_noul_examples(examples))
        self._backend = Backend(client, "ToolCallGuard")

    # -- deciding -------------------------------------------------------------------------------

    def check(self, tool: str, arguments: Mapping[str, Any], conversation: Sequence[Any] | None = None, *,
              description: str | None = None, config: RunnableConfig | None = None) -> GuardDecision:
        """Decide one call; traced as a ``jev_guard`` run under ``config`` (or the current run)."""
        return self._step().invoke(self._call(tool, arguments, conversation, description), config)

    async def acheck(self, tool: str, arguments: Mapping[str, Any], conversation: Sequence[Any] | None = None, *,
                     description: str | None = None, config: RunnableConfig | None = None) -> GuardDecision:
        return await self._step().ainvoke(self._call(tool, arguments, conversation, description), config)

    def _call(self, tool: str, arguments: Mapping[str, Any], conversation: Sequence[Any] | None,
              description: str | None) -> dict[str, Any]:
        """What the model reads: the tool, its arguments as JSON, and the last few turns."""
        call: dict[str, Any] = {"tool": tool}
        if description:
            call["tool_description"] = description
        call["arguments"] = json.loads(json.dumps(dict(arguments), default=str))
        if conversation and self.n_messages:
            call["recent_conversation"] = list(conversation)[-self.n_messages:]
        return call

    def _step(self) -> RunnableLambda:
        return step("jev_guard", self._decide, self._adecide)

    def _decide(self, call: dict[str, Any], config: RunnableConfig) -> GuardDecision:
        try:
            decision = self._decision(call, self._backend.ask(call, None, {QUESTION_ID: self.question}))
        except DECISION_ERRORS as exc:
            decision = self._failed(call, exc)
        announce("jev_guard", decision, config)
        return decision

    async def _adecide(self, call: dict[str, Any], config: RunnableConfig) -> GuardDecision:
        try:
            decision = self._decision(call, await self._backend.aask(call, None, {QUESTION_ID: self.question}))
        except DECISION_ERRORS as exc:
            decision = self._failed(call, exc)
        await aannounce("jev_guard", decision, config)
        return decision

    def _decision(self, call: dict[str, Any], resp: SystemOneResponse) -> GuardDecision:
        signal_or_raise(resp, QUESTION_ID, "ToolCallGuard")
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, NoulAnswer)
        return GuardDecision(tool=call["tool"], arguments=call["arguments"], allowed=answer.noul >= self.threshold,
                             probability=answer.noul, threshold=self.threshold)

    def _failed(self, call: dict[str, Any], exc: Exception) -> GuardDecision:
        if self.on_error == "raise":
            raise exc
        return GuardDecision(tool=call["tool"], arguments=call["arguments"], allowed=self.on_error == "allow",
                             probability=None, threshold=self.threshold, error=f"{type(exc).__name__}: {exc}")

    # -- what a blocked call returns ------------------------------------------------------------

    def reason(self, decision: GuardDecision) -> str:
        if decision.probability is None:
            return safe_reason(decision.error)
        return f"P(allowed) = {decision.probability:.2f} < {decision.threshold}"

    def message(self, decision: GuardDecision) -> str:
        """The text the agent reads in place of the tool's output."""
        return self.block_message.format(tool=decision.tool, reason=self.reason(decision))

    def error(self, decision: GuardDecision) -> ToolCallBlocked:
        return ToolCallBlocked(f"the call to {decision.tool!r} was blocked: {self.reason(decision)}",
                               tool=decision.tool, arguments=decision.arguments, probability=decision.probability,
                               question=self.instructions, threshold=decision.threshold, error=decision.error)

    def refusal(self, decision: GuardDecision, tool_call_id: str | None) -> ToolMessage | str:
        """A blocked call's result: a ToolMessage (status error) for a tool call, else the message alone."""
        if self.on_block == "raise":
            raise self.error(decision)
        if tool_call_id is None:
            return self.message(decision)
        return ToolMessage(content=self.message(decision), tool_call_id=tool_call_id, name=decision.tool,
                           status="error", artifact={"jev_guard": decision.model_dump(mode="json")})


class GuardedTool(BaseTool):
    """A tool that asks its :class:`ToolCallGuard` before every call; otherwise the wrapped tool itself.

    Same name, description and argument schema as ``tool``. A blocked call returns the guard's
    message (as an error ToolMessage when called with a tool call) and never runs ``tool``.
    ``conversation``, when given, returns the recent messages the guard should see.
    """

    tool: BaseTool
    guard: ToolCallGuard
    conversation: Callable[[], Sequence[Any]] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

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
                                    config=_child(config, run_manager, "jev:decide"))
        if not decision.allowed:
            return self.guard.refusal(decision, _CALL_ID.get())
        return self.tool.invoke(self._inner_input(args, kwargs), _child(config, run_manager, "guard:allowed"))

    async def _arun(self, *args: Any, config: RunnableConfig,
                    run_manager: AsyncCallbackManagerForToolRun | None = None, **kwargs: Any) -> Any:
        decision = await self.guard.acheck(self.name, _arguments(args, kwargs), self._recent(),
                                           description=self.description,
                                           config=_child(config, run_manager, "jev:decide"))
        if not decision.allowed:
            return self.guard.refusal(decision, _CALL_ID.get())
        return await self.tool.ainvoke(self._inner_input(args, kwargs), _child(config, run_manager, "guard:allowed"))

    def _recent(self) -> Sequence[Any] | None:
        return self.conversation() if self.conversation is not None else None

    def _inner_input(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The wrapped tool's input: the full tool call when there is one, so it returns its own ToolMessage."""
        if args:
            return args[0]
        call_id = _CALL_ID.get()
        if call_id is None:
            return kwargs
        return {"type": "tool_call", "name": self.tool.name, "args": kwargs, "id": call_id}


def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {"input": args[0]} if args else kwargs


def _child(config: RunnableConfig, run_manager: Any, tag: str) -> RunnableConfig:
    return patch_config(config, callbacks=run_manager.get_child(tag=tag) if run_manager is not None else None)


def guard_tool(tool: BaseTool, client: Any = None, *, guard: ToolCallGuard | None = None,
               instructions: str = DEFAULT_GUARD_INSTRUCTIONS, threshold: float = 0.5, on_block: str = "message",
               on_error: str = "block", block_message: str = DEFAULT_BLOCK_MESSAGE,
               conversation: Callable[[], Sequence[Any]] | None = None) -> GuardedTool:
    """``tool`` behind a guard: same name, description and argument schema; asks before every call.

    Pass ``client`` (with the guard options) or a ready ``guard`` shared between tools.
    Tools that take injected arguments (``InjectedState``, ``ToolRuntime``) are best guarded with
    the agent middleware, which wraps the call outside the tool.
    """
    if not isinstance(tool, BaseTool):
        raise TypeError(f"tool: expected a LangChain BaseTool (decorate a function with @tool), got "
                        f"{type(tool).__name__}")
    if (client is None) == (guard is None):
        raise ValueError("guard_tool: pass either client=... (with the guard options) or guard=ToolCallGuard(...)")
    if conversation is not None and not callable(conversation):
        raise TypeError(f"conversation: expected a callable returning recent messages, got {type(conversation).__name__}")
    if guard is None:
        guard = ToolCallGuard(client, instructions=instructions, threshold=threshold, on_block=on_block,
                              on_error=on_error, block_message=block_message)
    return GuardedTool(name=tool.name, description=tool.description, args_schema=tool.args_schema,
                       return_direct=tool.return_direct, handle_validation_error=tool.handle_validation_error,
                       tool=tool, guard=guard, conversation=conversation)


__all__ = ["ToolCallGuard", "GuardDecision", "GuardedTool", "guard_tool", "DEFAULT_GUARD_INSTRUCTIONS",
           "DEFAULT_BLOCK_MESSAGE"]
