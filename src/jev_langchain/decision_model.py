"""JevDecisionModel: the engine as LangChain's own decision model (``langchain_core.decisions``).

LangChain's ``AutoModeMiddleware`` (blocks risky tool calls) and ``ModelRouterMiddleware`` (picks the
agent's model) take any ``BaseDecisionModel``; this one answers their questions by reading one answer
token's logprobs from any chat model:

    classifier = JevDecisionModel(client=SystemOneClient(srv.client(), model=srv.model))
    agent = create_agent(model, tools, middleware=[AutoModeMiddleware(tools=[delete_file], classifier=classifier)])

Questions come as LangChain writes them (JSON instructions and descriptions are sent as JSON text);
a ``Box`` question or a media block is refused by name before any request. A choice the model gave
no signal on takes its default option (so ``ModelRouterMiddleware`` runs the default model rather than
ending the agent's run); a noul or score with no signal raises. The response carries the
answers, usage and model; the engine's own account (readout method, passes, labels missing, no
signal) is a ``jev_decision`` custom event on the decision's run and in its LangSmith metadata.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.callbacks import adispatch_custom_event, dispatch_custom_event
from langchain_core.decisions import BaseDecisionModel, ClassifierResponse
from langsmith.run_helpers import get_current_run_tree
from pydantic import ConfigDict, Field, PrivateAttr

from jev_shared import Choice, ClientPair, InvalidQuestionError, LabelReadoutError, SystemOneResponse

from ._checks import check_option
from ._convert import engine_question, lc_answer, lc_usage, refuse_media, to_state
from ._core import client_pair
from ._portable import Travels

PROVIDER = "jev"
EVENT = "jev_decision"


@dataclass(frozen=True)
class _Asked:
    """One LangChain request in the engine's terms, checked before any request goes out."""

    state: Any
    questions: dict[str, Any]
    originals: dict[str, Any]

    @classmethod
    def of(cls, state: Any, questions: Mapping[str, Any], defaults: Mapping[str, str]) -> _Asked:
        if not questions:
            raise InvalidQuestionError("a request needs at least one question", field="questions")
        refuse_media(state, "state")
        engine = {qid: engine_question(qid, q) for qid, q in questions.items()}
        for qid, key in defaults.items():
            question = engine.get(qid)
            if isinstance(question, Choice) and key not in question.criteria:
                raise InvalidQuestionError(f"choice_defaults: {key!r} is not one of the options "
                                           f"{sorted(question.criteria)}", question_id=qid, field="choice_defaults")
        return cls(to_state(state), engine, dict(questions))


class JevDecisionModel(Travels, BaseDecisionModel):
    """A LangChain ``BaseDecisionModel`` over a ``SystemOneClient``, an ``AsyncSystemOneClient`` or a chat model.

    Async calls are native with an async client (a chat model serves both). ``on_no_signal``: when
    no answer label was in the model's token window the distribution is a uniform stand-in, not
    evidence. ``"default"`` (the default): a choice takes its default option, ``choice_defaults[qid]``
    or else its first option, with confidence 0 (a model router goes on with the default model); a
    noul or a score raises :class:`jev_shared.LabelReadoutError` (there is no safe default for "is this
    call risky?"). ``"raise"``: every question raises. ``"uniform"``: return the stand-in.
    ``dumpd``/``dumps`` and pickle work: see :class:`jev_langchain._portable.Travels`.
    """

    client: Any
    model: str = ""
    on_no_signal: Literal["default", "raise", "uniform"] = "default"
    choice_defaults: dict[str, str] = Field(default_factory=dict)

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _pair: ClientPair = PrivateAttr()

    def __init__(self, client: Any = None, *, model: str | None = None,
                 on_no_signal: Literal["default", "raise", "uniform"] = "default",
                 choice_defaults: Mapping[str, str] | None = None, **kwargs: Any) -> None:
        pair = client_pair(client, "JevDecisionModel")
        if pair is None:
            raise TypeError(f"JevDecisionModel: client must be a SystemOneClient, an AsyncSystemOneClient or a "
                            f"LangChain chat model, got {type(client).__name__}")
        check_option("on_no_signal", on_no_signal, ("default", "raise", "uniform"))
        fields: dict[str, Any] = {"client": client, "model": pair.model if model is None else model,
                                  "on_no_signal": on_no_signal, "choice_defaults": dict(choice_defaults or {})}
        super().__init__(**fields, **kwargs)  # a dict: the base declares no __init__ fields to a type checker
        self._pair = pair

    def _build_engine(self) -> None:
        pair = client_pair(self.client, "JevDecisionModel")
        assert pair is not None  # it was built from this client once already
        self._pair = pair

    @property
    def jev_pair(self) -> ClientPair:
        """The engine clients it asks (our own doors use them directly)."""
        return self._pair

    @property
    def _provider(self) -> str:
        return PROVIDER

    def _classify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        asked = _Asked.of(state, questions, self.choice_defaults)
        resp = self._pair.ask(asked.state, asked.questions)
        dispatch_custom_event(EVENT, _extras(resp))
        return self._response(asked, resp)

    async def _aclassify(self, state: Any, questions: dict[str, Any]) -> ClassifierResponse:
        asked = _Asked.of(state, questions, self.choice_defaults)
        resp = await self._pair.aask(asked.state, asked.questions)
        await adispatch_custom_event(EVENT, _extras(resp))
        return self._response(asked, resp)

    def _response(self, asked: _Asked, resp: SystemOneResponse) -> ClassifierResponse:
        silent = [qid for qid in asked.questions if resp.no_signal(qid)]
        defaulted = {qid: self._default_of(qid, asked.questions[qid]) for qid in silent
                     if self.on_no_signal == "default" and isinstance(asked.questions[qid], Choice)}
        failed = [qid for qid in silent if self.on_no_signal != "uniform" and qid not in defaulted]
        if failed:
            raise LabelReadoutError(f"JevDecisionModel: no answer label was in the model's token window for "
                                    f"{failed} (no signal); the decision failed")
        _note_on_run(resp, defaulted)
        answers = {qid: lc_answer(a, asked.originals[qid]) for qid, a in resp.answers.items()}
        for qid, key in defaulted.items():  # the stand-in's distribution kept; the pick is the default, unsure
            answers[qid] = answers[qid].model_copy(update={"choice": key, "confidence": 0.0})
        return ClassifierResponse(model=resp.model, usage=lc_usage(resp.usage), answers=answers)

    def _default_of(self, qid: str, question: Choice) -> str:
        """The option a choice takes on no signal: the one named in ``choice_defaults``, else the first."""
        return self.choice_defaults.get(qid) or next(iter(question.criteria))


def _extras(resp: SystemOneResponse) -> dict[str, Any]:
    """The engine's account of the call: its debug dict (methods, passes, readout diagnostics) and cost."""
    return {"model": resp.model, "debug": resp.debug or {}, "n_calls": resp.usage.n_calls,
            "n_retries": resp.usage.n_retries, "latency_ms": resp.usage.latency_ms}


def _note_on_run(resp: SystemOneResponse, defaulted: Mapping[str, str]) -> None:
    """The extras in the LangSmith run's metadata, beside the usage the base class records there."""
    try:
        run_tree = get_current_run_tree()
        if run_tree is not None:
            run_tree.extra.setdefault("metadata", {})["jev"] = {**_extras(resp), "no_signal_defaults": dict(defaulted)}
    except Exception:  # noqa: BLE001 - tracing must not break a decision
        return


__all__ = ["JevDecisionModel"]
