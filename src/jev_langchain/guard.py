"""Tool-call guard: before a tool runs, ask whether this call (tool, arguments, recent turns) is allowed.

:class:`ToolCallGuard` holds the decision; :func:`guard_tool` puts it in front of one tool, and
:class:`jev_langchain.middleware.JevToolGuardMiddleware` in front of every tool of a ``create_agent``
agent. A blocked call never runs the tool: the agent reads a message saying so (or, with
``on_block="raise"``, :class:`ToolCallBlocked` stops the run). With ``block_below`` set, a call whose
P(allowed) falls in [block_below, threshold) goes to a person (LangGraph's interrupt). Each decision
is a ``jev_guard`` run in the trace and a ``jev_guard`` custom event.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from pydantic import BaseModel, ConfigDict

from jev_shared import Example, Noul, NoulAnswer, SystemOneResponse, band_for

from ._checks import (
    check_band,
    check_n_messages,
    check_noul_criteria,
    check_noul_examples,
    check_option,
    check_text,
    check_threshold,
)
from ._core import ON_ERROR, Decider, Engine, safe_reason, signal_or_raise
from ._portable import portable_client
from .errors import ToolCallBlocked
from .review import ask_human, review_answer, reviewer_message

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
#: How many reviewed decisions a guard remembers, so a resumed run sees the same decision.
_REMEMBERED = 256


class GuardDecision(BaseModel):
    """One guarded call: allowed, blocked or sent to a person, on what probability; ``error`` when it failed."""

    model_config = ConfigDict(frozen=True)

    tool: str
    arguments: dict[str, Any]
    allowed: bool
    #: P(the call should run); None when the decision failed.
    probability: float | None
    threshold: float
    error: str | None = None
    #: "allow", "block", or "review" (P(allowed) in the ask-a-human band [block_below, threshold)).
    outcome: Literal["allow", "block", "review"] = "block"


class ToolCallGuard(Decider):
    """Decides whether one tool call may run; shared by :func:`guard_tool` and the agent middleware.

    ``instructions`` is the statement that must hold for a call to run; the call runs when
    P(true) >= ``threshold``; with ``block_below``, P(true) in [block_below, threshold) asks a person.
    With ``labelled`` (pairs of a recorded answer or its P(true), and whether the call should have run)
    and a target, ``max_error=0.02`` or ``ask_rate=0.1``, both thresholds are chosen from that data
    (:class:`jev_shared.Band`: ``guard.band`` reports the thresholds, the expected ask rate and error).
    ``on_block``: ``"message"`` (the agent reads ``block_message``, formatted with ``{tool}`` and
    ``{reason}``) or ``"raise"`` (:class:`ToolCallBlocked`). ``on_error``: a failed decision
    ``"block"``s (default), ``"allow"``s or ``"raise"``s. The last ``n_messages`` turns of the
    conversation, when known, are shown to the model. ``client`` may be any ``BaseDecisionModel`` too.

    It pickles (the engine is left out and rebuilt from ``client``: :mod:`jev_langchain._portable`).
    It is no LangChain ``Serializable``: like the tools it guards (LangChain does not serialise
    tools), it is not a Runnable, so ``dumpd`` of it, of a guarded tool or of the middleware gives
    ``not_implemented``; rebuild it in code.
    """

    event: ClassVar[str] = "jev_guard"
    question_id: ClassVar[str] = QUESTION_ID

    def __init__(self, client: Any, *, instructions: str = DEFAULT_GUARD_INSTRUCTIONS,
                 criteria: dict[str, str] | None = None, threshold: float = 0.5, block_below: float | None = None,
                 on_block: str = "message", on_error: str = "block", block_message: str = DEFAULT_BLOCK_MESSAGE,
                 n_messages: int = 6, examples: Sequence[Example] | None = None,
                 labelled: Sequence[tuple[Any, Any]] | None = None, max_error: float | None = None,
                 ask_rate: float | None = None) -> None:
        self.instructions = check_text("instructions", instructions)
        #: The band fitted on ``labelled`` for ``max_error`` or ``ask_rate`` (its thresholds replace
        #: ``threshold`` and ``block_below``; ``str(guard.band)`` says what it expects), or None.
        self.band = band_for(labelled, max_error, ask_rate)
        if self.band is not None:
            threshold, block_below = self.band.allow, self.band.block
        self.threshold = check_threshold("threshold", threshold)
        self.block_below = check_band(self.threshold, block_below)
        self.on_block = check_option("on_block", on_block, ON_BLOCK)
        self.on_error = check_option("on_error", on_error, ON_ERROR)
        self.block_message = check_text("block_message", block_message)
        try:
            block_message.format(tool="t", reason="r")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"block_message: only {{tool}} and {{reason}} can be filled in, got {exc!r}") from None
        self.n_messages = check_n_messages(n_messages)
        self.question = Noul(instructions=instructions, criteria=check_noul_criteria(criteria),
                             examples=check_noul_examples(examples))
        self.client = client
        self._engine = Engine(client, "ToolCallGuard")
        self._reviewed: OrderedDict[str, GuardDecision] = OrderedDict()

    def __getstate__(self) -> dict[str, Any]:
        state = {k: v for k, v in vars(self).items() if k != "_engine"}
        return {**state, "client": portable_client(self.client, "ToolCallGuard")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        vars(self).update(state)
        self._engine = Engine(self.client, "ToolCallGuard")

    # -- deciding -------------------------------------------------------------------------------

    def check(self, tool: str, arguments: Mapping[str, Any], conversation: Sequence[Any] | None = None, *,
              description: str | None = None, config: RunnableConfig | None = None,
              call_id: str | None = None) -> GuardDecision:
        """Decide one call; traced as a ``jev_guard`` run under ``config`` (or the current run).

        With ``call_id``, a call already sent to a person gets the same decision again (a resumed run)."""
        if call_id is not None and call_id in self._reviewed:
            return self._reviewed[call_id]
        return self._remember(call_id, self._step().invoke(self._call(tool, arguments, conversation, description),
                                                           config))

    async def acheck(self, tool: str, arguments: Mapping[str, Any], conversation: Sequence[Any] | None = None, *,
                     description: str | None = None, config: RunnableConfig | None = None,
                     call_id: str | None = None) -> GuardDecision:
        if call_id is not None and call_id in self._reviewed:
            return self._reviewed[call_id]
        call = self._call(tool, arguments, conversation, description)
        return self._remember(call_id, await self._step().ainvoke(call, config))

    def _remember(self, call_id: str | None, decision: GuardDecision, *, always: bool = False) -> GuardDecision:
        if call_id is not None and (always or decision.outcome == "review"):
            self._reviewed[call_id] = decision
            while len(self._reviewed) > _REMEMBERED:
                self._reviewed.popitem(last=False)
        return decision

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

    def _question(self) -> Noul:
        return self.question

    def _interpret(self, input: dict[str, Any], resp: SystemOneResponse) -> GuardDecision:
        signal_or_raise(resp, QUESTION_ID, "ToolCallGuard")
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, NoulAnswer)
        p = answer.noul
        low = self.threshold if self.block_below is None else self.block_below
        outcome = "allow" if p >= self.threshold else "review" if p >= low else "block"
        return GuardDecision(tool=input["tool"], arguments=input["arguments"], allowed=outcome == "allow",
                             probability=p, threshold=self.threshold, outcome=outcome)

    def _on_error(self, input: dict[str, Any], exc: Exception) -> GuardDecision:
        if self.on_error == "raise":
            raise exc
        allowed = self.on_error == "allow"
        return GuardDecision(tool=input["tool"], arguments=input["arguments"], allowed=allowed, probability=None,
                             threshold=self.threshold, error=f"{type(exc).__name__}: {exc}",
                             outcome="allow" if allowed else "block")

    # -- what a call that does not simply run gets ----------------------------------------------

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

    def review(self, decision: GuardDecision, tool_call_id: str | None,
               description: str | None = None) -> dict[str, Any] | ToolMessage | str:
        """Ask a person about an unsure call; returns the arguments to run with, or the call's result.

        The question is HumanInTheLoopMiddleware's per-call request (``type: "tool_approval"``); the
        answer is one of its decisions: approve, edit (new ``args``), reject or respond."""
        answer = review_answer(ask_human({
            "type": "tool_approval", "tool_call_id": tool_call_id, "name": decision.tool, "args": decision.arguments,
            "description": description or f"The guard is unsure about this call ({self.reason(decision)}); "
                                          "approve, edit, reject or respond.",
            "jev_guard": decision.model_dump(mode="json")}))
        if answer["type"] in ("approve", "edit"):
            return dict(answer["edited_action"]["args"]) if answer["type"] == "edit" else dict(decision.arguments)
        text, status = reviewer_message(decision.tool, answer)
        if tool_call_id is None:
            return text
        return ToolMessage(content=text, tool_call_id=tool_call_id, name=decision.tool, status=status,
                           artifact={"jev_guard": decision.model_dump(mode="json"), "review": answer["type"]})

    def settle(self, decision: GuardDecision, tool_call_id: str | None) -> dict[str, Any] | ToolMessage | str:
        """What happens to the call: the arguments to run it with, or the result in its place."""
        if decision.outcome == "allow":
            return dict(decision.arguments)
        if decision.outcome == "review":
            return self.review(decision, tool_call_id)
        return self.refusal(decision, tool_call_id)

    def when(self, request: Any) -> bool:
        """A ``when`` predicate for HumanInTheLoopMiddleware: interrupt unless the guard is sure the call may run.

        ``InterruptOnConfig(allowed_decisions=[...], when=guard.when)``; the decision is remembered per
        tool call id, so the predicate answers alike when the run resumes."""
        call = request.tool_call
        state = request.state
        messages = state.get("messages") if isinstance(state, Mapping) else getattr(state, "messages", None)
        decision = self.check(call["name"], call.get("args") or {}, list(messages or []), call_id=call.get("id"))
        return self._remember(call.get("id"), decision, always=True).outcome != "allow"


__all__ = ["ToolCallGuard", "GuardDecision", "DEFAULT_GUARD_INSTRUCTIONS", "DEFAULT_BLOCK_MESSAGE"]
