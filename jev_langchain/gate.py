"""JevGate: a Runnable that passes its input through unchanged when a yes/no statement about it holds.

For ``gate | llm`` pipelines: the gate asks one ``Noul`` question (``instructions`` is the
statement) and lets the input through when P(true) >= ``threshold``. A blocked input raises
:class:`GateBlocked` or goes to a fallback Runnable. A decision that fails (provider down, no
readable answer) blocks by default: a gate that cannot tell should not open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from langchain_core.runnables.config import patch_config
from pydantic import BaseModel, ConfigDict, PrivateAttr

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
    signal_or_raise,
    step,
)
from .errors import GateBlocked

QUESTION_ID = "gate"


class GateDecision(BaseModel):
    """Whether the gate opened, on what probability; ``error`` when the decision itself failed."""

    model_config = ConfigDict(frozen=True)

    allowed: bool
    #: P(true) for the gate's statement; None when the decision failed.
    probability: float | None
    threshold: float
    error: str | None = None


class JevGate(RunnableSerializable[Any, Any]):
    """Pass the input through unchanged when P(``instructions`` is true) >= ``threshold``.

    >>> gate = JevGate(client, "The message is a genuine customer question, not spam or abuse.")
    >>> chain = gate | prompt | llm          # spam raises GateBlocked before the LLM is called

    ``on_block``: ``"raise"`` (:class:`GateBlocked`) or a Runnable / callable that gets the input
    instead. ``on_error``: what a failed decision does: ``"block"`` (default), ``"allow"`` or ``"raise"``.
    """

    client: Any
    instructions: str
    criteria: dict[str, str] | None = None
    threshold: float = 0.5
    state: Callable[[Any], Any] | None = None
    on_block: Literal["raise"] | Runnable = "raise"
    on_error: Literal["block", "allow", "raise"] = "block"
    examples: list[Example] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _backend: Backend = PrivateAttr()

    def __init__(self, client: Any, instructions: str, *, criteria: dict[str, str] | None = None,
                 threshold: float = 0.5, state: Callable[[Any], Any] | None = None, on_block: Any = "raise",
                 on_error: str = "block", examples: Sequence[Example] | None = None, **kwargs: Any) -> None:
        check_text("instructions", instructions)
        threshold = check_threshold("threshold", threshold)
        check_option("on_error", on_error, ON_ERROR)
        if state is not None and not callable(state):
            raise TypeError(f"state: expected a callable that turns the input into a state, got {type(state).__name__}")
        if isinstance(on_block, str):
            check_option("on_block", on_block, ("raise",))
        elif not isinstance(on_block, Runnable):
            if not callable(on_block):
                raise TypeError(f"on_block: expected 'raise' or a Runnable or callable fallback, got "
                                f"{type(on_block).__name__}")
            on_block = RunnableLambda(on_block)
        question = Noul(instructions=instructions, criteria=check_noul_criteria(criteria),
                        examples=check_noul_examples(examples))
        backend = Backend(client, "JevGate")
        super().__init__(client=client, instructions=instructions, criteria=question.criteria,  # type: ignore[call-arg]
                         threshold=threshold, state=state, on_block=on_block, on_error=on_error,
                         examples=question.examples, **kwargs)
        self._backend = backend

    @property
    def question(self) -> Noul:
        return Noul(instructions=self.instructions, criteria=self.criteria, examples=self.examples)

    # -- the decision ---------------------------------------------------------------------------

    def decide(self, input: Any, config: RunnableConfig | None = None) -> float:
        """P(the statement is true) for this input; a failed decision raises (no ``on_error`` here)."""
        return self._probability_step().invoke(input, config)

    async def adecide(self, input: Any, config: RunnableConfig | None = None) -> float:
        return await self._probability_step().ainvoke(input, config)

    def _probability_step(self) -> RunnableLambda:
        return step("jev_gate", lambda x: self._probability(self._backend.ask(x, self.state, self._questions())),
                    self._aprobability)

    async def _aprobability(self, input: Any) -> float:
        return self._probability(await self._backend.aask(input, self.state, self._questions()))

    def _questions(self) -> dict[str, Noul]:
        return {QUESTION_ID: self.question}

    @staticmethod
    def _probability(resp: SystemOneResponse) -> float:
        signal_or_raise(resp, QUESTION_ID, "JevGate")
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, NoulAnswer)
        return answer.noul

    def _check(self, input: Any, config: RunnableConfig) -> GateDecision:
        try:
            p = self._probability(self._backend.ask(input, self.state, self._questions()))
        except DECISION_ERRORS as exc:
            decision = self._failed(exc)
        else:
            decision = GateDecision(allowed=p >= self.threshold, probability=p, threshold=self.threshold)
        announce("jev_gate", decision, config)
        return decision

    async def _acheck(self, input: Any, config: RunnableConfig) -> GateDecision:
        try:
            p = self._probability(await self._backend.aask(input, self.state, self._questions()))
        except DECISION_ERRORS as exc:
            decision = self._failed(exc)
        else:
            decision = GateDecision(allowed=p >= self.threshold, probability=p, threshold=self.threshold)
        await aannounce("jev_gate", decision, config)
        return decision

    def _failed(self, exc: Exception) -> GateDecision:
        if self.on_error == "raise":
            raise exc
        return GateDecision(allowed=self.on_error == "allow", probability=None, threshold=self.threshold,
                            error=f"{type(exc).__name__}: {exc}")

    # -- running --------------------------------------------------------------------------------

    def _blocked(self, input: Any, decision: GateDecision) -> GateBlocked:
        if decision.probability is None:
            why = f"the decision failed ({decision.error}) and on_error='block'"
        else:
            why = f"P(true) = {decision.probability:.3f} < threshold {self.threshold}"
        return GateBlocked(f"JevGate blocked the input: {why}; statement: {self.instructions!r}",
                           probability=decision.probability, question=self.instructions, input=input,
                           threshold=self.threshold, error=decision.error)

    def _decision_config(self, run_manager: Any, config: RunnableConfig) -> RunnableConfig:
        return patch_config(config, callbacks=run_manager.get_child(tag="jev:decide"))

    def _fallback_config(self, decision: GateDecision, run_manager: Any, config: RunnableConfig) -> RunnableConfig:
        child = patch_config(config, callbacks=run_manager.get_child(tag="gate:blocked"))
        child["metadata"] = {**child.get("metadata", {}), "jev_gate_probability": decision.probability,
                             "jev_gate_error": decision.error}
        return child

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(self._invoke, input, config, **kwargs)

    def _invoke(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig,
                **kwargs: Any) -> Any:
        decision = step("jev_gate", self._check, self._acheck).invoke(input, self._decision_config(run_manager, config))
        if decision.allowed:
            return input
        if not isinstance(self.on_block, Runnable):
            raise self._blocked(input, decision)
        return self.on_block.invoke(input, self._fallback_config(decision, run_manager, config), **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    async def _ainvoke(self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig,
                       **kwargs: Any) -> Any:
        decision = await step("jev_gate", self._check, self._acheck).ainvoke(
            input, self._decision_config(run_manager, config))
        if decision.allowed:
            return input
        if not isinstance(self.on_block, Runnable):
            raise self._blocked(input, decision)
        return await self.on_block.ainvoke(input, self._fallback_config(decision, run_manager, config), **kwargs)


__all__ = ["JevGate", "GateDecision"]
