"""What the router, the gate and the guard share: the way to a decision, and the traced step around it.

:class:`Engine` reaches a decision through the engine's :class:`jev_shared.ClientPair` (an engine
client, a LangChain chat model, or a :class:`~jev_langchain.JevDecisionModel`) or through another
provider's ``BaseDecisionModel``. :class:`Decider` is the one decision path of every component:
build the question, ask, read the answer into a decision, announce it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import Any, ClassVar, Protocol, runtime_checkable

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.decisions import BaseDecisionModel, ClassifierRequest
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.config import patch_config
from pydantic import BaseModel

from jev_shared import (
    ClientPair,
    IncompleteAnswerError,
    InvalidQuestionError,
    LabelReadoutError,
    MalformedAnswerError,
    ModelRefusalError,
    ProviderError,
    SystemOneResponse,
)

from ._convert import engine_response, lc_question, to_state
from .chat_model import chat_model_of, jev_async_client_from_chat_model, jev_client_from_chat_model

#: Errors that mean "the model could not decide this time" (as opposed to a misuse, which always raises).
DECISION_ERRORS: tuple[type[Exception], ...] = (
    ProviderError, LabelReadoutError, MalformedAnswerError, ModelRefusalError, IncompleteAnswerError,
)
#: What a failed decision does in a gate or a guard: block (fail closed), allow (fail open) or raise.
ON_ERROR = ("block", "allow", "raise")


@runtime_checkable
class HoldsPair(Protocol):
    """What holds its own engine clients (``JevDecisionModel``): read by type, not by an attribute's name."""

    @property
    def jev_pair(self) -> ClientPair: ...


def client_pair(client: Any, owner: str) -> ClientPair | None:
    """The engine clients behind ``client``: an engine client, a chat model (both clients) or a JevDecisionModel."""
    pair = ClientPair.of(client, owner)
    if pair is not None:
        return pair
    if chat_model_of(client) is not None:
        return ClientPair(jev_client_from_chat_model(client), jev_async_client_from_chat_model(client), owner=owner)
    if isinstance(client, HoldsPair):  # a JevDecisionModel: its own pair, so nothing is converted twice
        inner = client.jev_pair
        return ClientPair(inner.sync, inner.async_, owner=owner) if isinstance(inner, ClientPair) else None
    return None


class Engine:
    """The way one component reaches a decision: the engine's clients, or another provider's decision model."""

    def __init__(self, client: Any, owner: str) -> None:
        self.owner = owner
        self.pair = client_pair(client, owner)
        self.foreign = client if self.pair is None and isinstance(client, BaseDecisionModel) else None
        if self.pair is None and self.foreign is None:
            raise TypeError(
                f"{owner}: client must be a SystemOneClient, an AsyncSystemOneClient, a LangChain chat model or a "
                f"BaseDecisionModel, got {type(client).__name__}; wrap an OpenAI-compatible client as "
                "SystemOneClient(client, model=...)"
            )

    def ask(self, value: Any, state: Callable[[Any], Any] | None, questions: Mapping[str, Any]) -> SystemOneResponse:
        """Ask ``questions`` about the input ``value`` (through ``state`` when given)."""
        with self._explained(value, state is not None):
            engine_state, started = state(value) if state is not None else to_state(value), time.perf_counter()
            if self.foreign is not None:
                return engine_response(self.foreign.invoke(_request(engine_state, questions)), started)
            return self._pair().ask(engine_state, questions)

    async def aask(self, value: Any, state: Callable[[Any], Any] | None,
                   questions: Mapping[str, Any]) -> SystemOneResponse:
        with self._explained(value, state is not None):
            engine_state, started = state(value) if state is not None else to_state(value), time.perf_counter()
            if self.foreign is not None:
                return engine_response(await self.foreign.ainvoke(_request(engine_state, questions)), started)
            return await self._pair().aask(engine_state, questions)

    def _pair(self) -> ClientPair:
        assert self.pair is not None
        return self.pair

    @contextmanager
    def _explained(self, value: Any, custom: bool) -> Iterator[None]:
        """Say which component's input was unusable, and how to fix it; other question errors pass."""
        try:
            yield
        except InvalidQuestionError as exc:
            if exc.field != "state":
                raise
            what = str(exc).removeprefix("state: ")
            if custom:
                raise InvalidQuestionError(f"what the {self.owner}'s state= callable returned {what}",
                                           field="state") from None
            raise InvalidQuestionError(
                f"the {self.owner} input ({type(value).__name__}) {what}; pass state=<callable> to turn the input "
                "into text, a JSON object or chat turns", field="state") from None


def _request(state: Any, questions: Mapping[str, Any]) -> ClassifierRequest:
    return {"state": state, "questions": {qid: lc_question(q) for qid, q in questions.items()}}


class Decider:
    """The one decision path of the router, the gate and the guard.

    Subclasses set ``event`` / ``question_id`` and give ``_question``, ``_interpret`` (the answer as
    a decision) and ``_on_error`` (a failed decision as a decision, or raise); ``strict`` raises
    every failure (``decide()`` has no ``on_error``).
    """

    event: ClassVar[str]
    question_id: ClassVar[str]
    _engine: Engine

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # cooperative: the fields go on to the pydantic model after Decider in the subclass's MRO
        super().__init__(*args, **kwargs)

    def _question(self) -> Any:
        raise NotImplementedError

    def _state_fn(self) -> Callable[[Any], Any] | None:
        return None

    def _interpret(self, input: Any, resp: SystemOneResponse) -> BaseModel:
        raise NotImplementedError

    def _on_error(self, input: Any, exc: Exception) -> BaseModel:
        raise exc

    def _questions(self) -> dict[str, Any]:
        return {self.question_id: self._question()}

    def _settle(self, input: Any, resp: SystemOneResponse | None, exc: Exception | None, strict: bool) -> BaseModel:
        if exc is None:
            try:
                assert resp is not None
                return self._interpret(input, resp)
            except DECISION_ERRORS as err:
                exc = err
        if strict:
            raise exc
        return self._on_error(input, exc)

    def _run(self, input: Any, config: RunnableConfig, *, strict: bool = False) -> BaseModel:
        try:
            resp, exc = self._engine.ask(input, self._state_fn(), self._questions()), None
        except DECISION_ERRORS as err:
            resp, exc = None, err
        decision = self._settle(input, resp, exc, strict)
        dispatch_custom_event(self.event, decision.model_dump(mode="json"), config=config)
        return decision

    async def _arun(self, input: Any, config: RunnableConfig, *, strict: bool = False) -> BaseModel:
        try:
            resp, exc = await self._engine.aask(input, self._state_fn(), self._questions()), None
        except DECISION_ERRORS as err:
            resp, exc = None, err
        decision = self._settle(input, resp, exc, strict)
        await adispatch_custom_event(self.event, decision.model_dump(mode="json"), config=config)
        return decision

    def _step(self, strict: bool = False) -> RunnableLambda:
        """The decision as its own traced run, so its model calls and its outcome show in a trace."""
        return RunnableLambda(partial(self._run, strict=strict), afunc=partial(self._arun, strict=strict),
                              name=self.event)


def child_config(config: RunnableConfig, run_manager: Any, tag: str) -> RunnableConfig:
    """``config`` for a child run of ``run_manager``'s run, tagged ``tag``."""
    return patch_config(config, callbacks=run_manager.get_child(tag=tag) if run_manager is not None else None)


def signal_or_raise(resp: SystemOneResponse, question_id: str, owner: str) -> None:
    """A readout with no label in its window is a failed decision: its uniform distribution is a
    stand-in, not evidence, and must never open a gate (P(true) = 0.5 meets a 0.5 threshold)."""
    if resp.no_signal(question_id):
        raise LabelReadoutError(f"{owner}: no answer label was in the model's token window, so the model gave no "
                                "signal; the decision failed")


def safe_reason(error: str | None) -> str:
    """What a blocked call tells the agent's model of a failure: its kind, never the provider's raw text."""
    kind = (error or "").split(":", 1)[0].strip()
    return f"the guard could not decide ({kind or 'error'})"
