"""JevGate: a Runnable that passes its input through unchanged when a yes/no statement about it holds.

For ``gate | llm`` pipelines: the gate asks one ``Noul`` question (``instructions`` is the
statement) and lets the input through when P(true) >= ``threshold``. A blocked input raises
:class:`GateBlocked` or goes to a fallback Runnable. A decision that fails (provider down, no
readable answer) blocks by default: a gate that cannot tell should not open.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Literal

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from pydantic import BaseModel, ConfigDict, PrivateAttr

from jev_shared import Band, Example, Noul, NoulAnswer, SystemOneResponse, band_for

from ._checks import (
    check_noul_criteria,
    check_noul_examples,
    check_option,
    check_state,
    check_text,
    check_threshold,
)
from ._core import ON_ERROR, Decider, Engine, child_config, signal_or_raise
from ._portable import Travels, examples_json
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
    #: "allow", "block", or "ask" (a fitted band's [block, allow): ``on_ask`` gets the input).
    outcome: Literal["allow", "ask", "block"] = "block"


class JevGate(Decider, Travels, RunnableSerializable[Any, Any]):
    """Pass the input through unchanged when P(``instructions`` is true) >= ``threshold``.

    >>> gate = JevGate(client, "The message is a genuine customer question, not spam or abuse.")
    >>> chain = gate | prompt | llm          # spam raises GateBlocked before the LLM is called

    ``on_block``: ``"raise"`` (:class:`GateBlocked`) or a Runnable / callable that gets the input
    instead. ``on_error``: what a failed decision does: ``"block"`` (default), ``"allow"`` or ``"raise"``.
    ``client`` may be any ``BaseDecisionModel`` too. ``dumpd``/``dumps`` and pickle work: see
    :class:`jev_langchain._portable.Travels`.

    With ``labelled`` (pairs of a recorded answer or its P(true), and whether the statement held) and a
    target, ``max_error=0.02`` or ``ask_rate=0.1``, the gate chooses allow / ask / block thresholds from
    that data (:class:`jev_shared.Band`; ``gate.band`` reports them, with the expected ask rate and
    error): an input in the ask band goes to ``on_ask`` (a Runnable: a person's review), or, with
    ``on_ask="block"`` (default), the way a blocked one does.
    """

    client: Any
    instructions: str
    criteria: dict[str, str] | None = None
    threshold: float = 0.5
    state: Callable[[Any], Any] | None = None
    on_block: Literal["raise"] | Runnable = "raise"
    on_error: Literal["block", "allow", "raise"] = "block"
    examples: list[Example] | None = None
    band: Band | None = None
    on_ask: Literal["block"] | Runnable = "block"

    model_config = ConfigDict(arbitrary_types_allowed=True)
    event: ClassVar[str] = "jev_gate"
    question_id: ClassVar[str] = QUESTION_ID

    _engine: Engine = PrivateAttr()

    def __init__(self, client: Any, instructions: str, *, criteria: dict[str, str] | None = None,
                 threshold: float = 0.5, state: Callable[[Any], Any] | None = None, on_block: Any = "raise",
                 on_error: str = "block", examples: Sequence[Example] | None = None,
                 labelled: Sequence[tuple[Any, Any]] | None = None, max_error: float | None = None,
                 ask_rate: float | None = None, on_ask: Any = "block", **kwargs: Any) -> None:
        check_text("instructions", instructions)
        band = kwargs.pop("band", None) or band_for(labelled, max_error, ask_rate)
        threshold = check_threshold("threshold", band.allow if band is not None else threshold)
        check_option("on_error", on_error, ON_ERROR)
        question = Noul(instructions=instructions, criteria=check_noul_criteria(criteria),
                        examples=check_noul_examples(examples))
        engine = Engine(client, "JevGate")
        super().__init__(client=client, instructions=instructions, criteria=question.criteria,
                         threshold=threshold, state=check_state(state), on_block=_fallback(on_block),
                         on_error=on_error, examples=question.examples, band=band,
                         on_ask=_ask_branch(on_ask), **kwargs)
        self._engine = engine

    def _build_engine(self) -> None:
        self._engine = Engine(self.client, "JevGate")

    @property
    def lc_attributes(self) -> dict[str, Any]:
        return examples_json(self.examples)

    @property
    def question(self) -> Noul:
        return Noul(instructions=self.instructions, criteria=self.criteria, examples=self.examples)

    # -- the decision ---------------------------------------------------------------------------

    def decide(self, input: Any, config: RunnableConfig | None = None) -> GateDecision:
        """The gate's decision for this input; a failed decision raises (no ``on_error`` here)."""
        return self._step(strict=True).invoke(input, config)

    async def adecide(self, input: Any, config: RunnableConfig | None = None) -> GateDecision:
        return await self._step(strict=True).ainvoke(input, config)

    def _question(self) -> Noul:
        return self.question

    def _state_fn(self) -> Callable[[Any], Any] | None:
        return self.state

    def _interpret(self, input: Any, resp: SystemOneResponse) -> GateDecision:
        signal_or_raise(resp, QUESTION_ID, "JevGate")
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, NoulAnswer)
        p = answer.noul
        outcome = self.band.outcome(p) if self.band is not None else "allow" if p >= self.threshold else "block"
        return GateDecision(allowed=outcome == "allow", probability=p, threshold=self.threshold, outcome=outcome)

    def _on_error(self, input: Any, exc: Exception) -> GateDecision:
        if self.on_error == "raise":
            raise exc
        allowed = self.on_error == "allow"
        return GateDecision(allowed=allowed, probability=None, threshold=self.threshold,
                            error=f"{type(exc).__name__}: {exc}", outcome="allow" if allowed else "block")

    # -- running --------------------------------------------------------------------------------

    def _blocked(self, input: Any, decision: GateDecision) -> GateBlocked:
        if decision.probability is None:
            why = f"the decision failed ({decision.error}) and on_error='block'"
        else:
            why = (f"P(true) = {decision.probability:.3f} is in the ask band [{self.band.block:.3f}, "
                   f"{self.threshold:.3f}) and on_ask='block'" if decision.outcome == "ask" and self.band else
                   f"P(true) = {decision.probability:.3f} < threshold {self.threshold}")
        return GateBlocked(f"JevGate blocked the input: {why}; statement: {self.instructions!r}",
                           probability=decision.probability, question=self.instructions, input=input,
                           threshold=self.threshold, error=decision.error)

    def _fallback(self, input: Any, decision: GateDecision, run_manager: Any,
                  config: RunnableConfig) -> tuple[Runnable, RunnableConfig]:
        """The fallback for a blocked input, with its config (tagged, the decision in its metadata); or raise."""
        if decision.outcome == "ask" and isinstance(self.on_ask, Runnable):
            child = child_config(config, run_manager, "gate:ask")
            child["metadata"] = {**child.get("metadata", {}), "jev_gate_probability": decision.probability}
            return self.on_ask, child
        if not isinstance(self.on_block, Runnable):
            raise self._blocked(input, decision)
        child = child_config(config, run_manager, "gate:blocked")
        child["metadata"] = {**child.get("metadata", {}), "jev_gate_probability": decision.probability,
                             "jev_gate_error": decision.error}
        return self.on_block, child

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(self._invoke, input, config, **kwargs)

    def _invoke(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig,
                **kwargs: Any) -> Any:
        decision = self._step().invoke(input, child_config(config, run_manager, "jev:decide"))
        if decision.allowed:
            return input
        fallback, child = self._fallback(input, decision, run_manager, config)
        return fallback.invoke(input, child, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    async def _ainvoke(self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig,
                       **kwargs: Any) -> Any:
        decision = await self._step().ainvoke(input, child_config(config, run_manager, "jev:decide"))
        if decision.allowed:
            return input
        fallback, child = self._fallback(input, decision, run_manager, config)
        return await fallback.ainvoke(input, child, **kwargs)


def _ask_branch(on_ask: Any) -> Any:
    """``"block"`` (an asked input goes the blocked way), or the ask branch as a Runnable."""
    if isinstance(on_ask, str):
        return check_option("on_ask", on_ask, ("block",))
    return _fallback(on_ask)


def _fallback(on_block: Any) -> Any:
    """``"raise"``, or the fallback as a Runnable; checked now, not at the first blocked input."""
    if isinstance(on_block, str):
        return check_option("on_block", on_block, ("raise",))
    if isinstance(on_block, Runnable):
        return on_block
    if not callable(on_block):
        raise TypeError(f"on_block: expected 'raise' or a Runnable or callable fallback, got {type(on_block).__name__}")
    return RunnableLambda(on_block)


__all__ = ["JevGate", "GateDecision"]
