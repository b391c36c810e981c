"""Selectors for ``RouterQueryEngine`` and ``RouterRetriever`` that read a distribution, not a guess.

LlamaIndex's own selectors ask the LLM to *write* its pick (a number and a reason) and parse it.
These ask the engine a typed question instead: the candidates' names and descriptions become the
options of a :class:`~jev_shared.Choice` (or one :class:`~jev_shared.Noul` per candidate), the
query is the state, and the answer is a probability for every candidate. The pick, its
probability and the confidence are then facts a caller can act on: fall back below a confidence,
keep every candidate above a threshold, or log the full distribution.

A selection is three steps: plan the questions (``candidates``), ask (the one sync/async
difference, through the engine's ``ClientPair``), read the pick (``picks``) into a result (``results``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from llama_index.core.base.base_selector import BaseSelector
from llama_index.core.instrumentation import get_dispatcher  # pyright: ignore[reportPrivateImportUsage]  # re-exported without __all__
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.prompts.prompt_type import PromptType
from llama_index.core.schema import QueryBundle
from llama_index.core.tools.types import ToolMetadata

from jev_shared import AsyncSystemOneClient, ChoiceAnswer, DecisionSets, NoulAnswer, SystemOneClient, SystemOneResponse

from ._checks import int_at_least, one_of, unit_interval
from ._clients import client_pair, resolve_clients
from .candidates import QUESTION_ID, Labels, Plan, choice_plan, noul_plan, option_keys
from .picks import Pick, multi_pick, single_pick
from .prompts import (
    BASE_VARIABLES,
    CANDIDATE_VARIABLES,
    DEFAULT_MULTI_NOUL_TMPL,
    DEFAULT_MULTI_SELECT_TMPL,
    DEFAULT_SINGLE_SELECT_TMPL,
    QuestionKind,
    checked_template,
)
from .results import JevSelectionEvent, JevSelectorResult, LowConfidenceError, selector_result

__all__ = [  # the names this module has always offered; most now live in the modules above
    "JevSingleSelector", "JevMultiSelector", "JevSelectorResult", "JevSelectionEvent", "LowConfidenceError",
    "DEFAULT_SINGLE_SELECT_TMPL", "DEFAULT_MULTI_SELECT_TMPL", "DEFAULT_MULTI_NOUL_TMPL", "option_keys",
]

dispatcher = get_dispatcher(__name__)


class _JevSelector(BaseSelector):
    """What both selectors share: the client pair, the customisable prompt, the ask, the event."""

    prompt_type: ClassVar[PromptType]
    #: The template variables the class fills whatever the question.
    base_variables: ClassVar[frozenset[str]] = BASE_VARIABLES

    def __init__(self, client: SystemOneClient | None, async_client: AsyncSystemOneClient | None,
                 prompt: BasePromptTemplate | str | None, labels: Labels | None, question: QuestionKind) -> None:
        one_of("labels", labels, (None, "letters", "names"))
        self.labels: Labels | None = labels
        self.question: QuestionKind = question
        #: The template variables this selector fills.
        self.variables = self.template_variables(question)
        self._pair = client_pair(client, async_client, type(self).__name__)
        self._prompt = self._checked(prompt if prompt is not None else self.default_template(question))

    @classmethod
    def template_variables(cls, question: QuestionKind) -> frozenset[str]:
        """What the prompt may use: the class's variables, and for a noul the candidate's name and description."""
        return cls.base_variables | (CANDIDATE_VARIABLES if question == "noul" else frozenset())

    @classmethod
    def default_template(cls, question: QuestionKind) -> str:
        raise NotImplementedError

    # -- prompts, as LlamaIndex's own selectors expose them ------------------------------------

    def _get_prompts(self) -> dict[str, Any]:
        return {"prompt": self._prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "prompt" in prompts:
            self._prompt = self._checked(prompts["prompt"])

    def _checked(self, prompt: BasePromptTemplate | str) -> BasePromptTemplate:
        return checked_template(prompt, prompt_type=self.prompt_type, variables=self.variables,
                                owner=type(self).__name__, question=self.question)

    # -- one selection: plan, ask (the only sync/async difference), finish ----------------------

    def _select(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> JevSelectorResult:
        plan = self._plan(choices, query)
        return self._finish(plan, self._pair.ask(query.query_str, plan.questions, **plan.options), query)

    async def _aselect(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> JevSelectorResult:
        plan = self._plan(choices, query)
        return self._finish(plan, await self._pair.aask(query.query_str, plan.questions, **plan.options), query)

    def _plan(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> Plan:
        raise NotImplementedError

    def _read(self, keys: list[str], resp: SystemOneResponse) -> tuple[dict[str, float], float | None, Pick]:
        """The probabilities per key, the confidence (None for nouls) and the pick."""
        raise NotImplementedError

    def _finish(self, plan: Plan, resp: SystemOneResponse, query: QueryBundle) -> JevSelectorResult:
        """The result, emitted as an event before a low-confidence refusal is raised with it."""
        probs, confidence, pick = self._read(plan.keys, resp)
        result = selector_result(plan.keys, resp, probs, pick.picked, pick.reasons, confidence=confidence,
                                 question=self.question, note=pick.note, method_id=QUESTION_ID)
        dispatcher.event(JevSelectionEvent(selector=type(self).__name__, query_str=query.query_str, result=result))
        if pick.refusal is not None:
            raise LowConfidenceError(pick.refusal, result=result)
        return result


class JevSingleSelector(_JevSelector):
    """Select one candidate: the most probable under a Choice over the candidates' names and descriptions.

    Args:
        client: a ``SystemOneClient`` (sync ``select`` / ``query``; async runs it in a thread).
        async_client: an ``AsyncSystemOneClient`` for a native ``aselect`` / ``aquery``.
        prompt: the question's instructions; may use ``{query_str}``, ``{num_choices}``, ``{context_list}``.
        min_confidence: below this confidence, select ``default_index`` or raise :class:`LowConfidenceError`.
        default_index: the candidate to fall back to below ``min_confidence``.
        labels: how the model answers: ``"letters"`` (A, B, ...) or ``"names"`` (the tool's own name;
            the engine falls back to letters when two names share a first token); None: the client's setting.
    """

    prompt_type = PromptType.SINGLE_SELECT

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 prompt: BasePromptTemplate | str | None = None, min_confidence: float = 0.0,
                 default_index: int | None = None, labels: Labels | None = None) -> None:
        unit_interval("min_confidence", min_confidence)
        if default_index is not None:
            int_at_least("default_index", default_index, 0)
        super().__init__(client, async_client, prompt, labels, "choice")
        self.min_confidence = min_confidence
        self.default_index = default_index

    @classmethod
    def default_template(cls, question: QuestionKind) -> str:
        return DEFAULT_SINGLE_SELECT_TMPL

    @classmethod
    def from_defaults(cls, client: Any = None, *, llm: Any = None, async_client: Any = None, model: str | None = None,
                      prompt_template_str: str | None = None, min_confidence: float = 0.0,
                      default_index: int | None = None, labels: Labels | None = None,
                      **client_kwargs: Any) -> JevSingleSelector:
        """From an engine client, an OpenAI-compatible client (with ``model=``), or a LlamaIndex ``llm``.

        With none of them, ``Settings.llm`` serves, as for ``LLMSingleSelector``. ``client_kwargs``
        (``method=``, ``mode=``, ``confidence=``, ...) configure the engine clients built here.
        """
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, prompt=prompt_template_str, min_confidence=min_confidence,
                   default_index=default_index, labels=labels)

    def _plan(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> Plan:
        if self.default_index is not None and self.default_index >= len(choices):
            raise ValueError(f"default_index: {self.default_index} is out of range for {len(choices)} choices")
        return choice_plan(choices, query, self._prompt, method=self._pair.method, labels=self.labels)

    def _read(self, keys: list[str], resp: SystemOneResponse) -> tuple[dict[str, float], float | None, Pick]:
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, ChoiceAnswer)
        probs, conf = answer.probabilities, answer.confidence
        return probs, conf, single_pick(keys, probs, answer.choice, conf, min_confidence=self.min_confidence,
                                        default_index=self.default_index)


class JevMultiSelector(_JevSelector):
    """Select every candidate whose probability reaches ``threshold``, most probable first.

    Args:
        client / async_client / prompt: as for :class:`JevSingleSelector`; the prompt may also use
            ``{max_outputs}``, and with ``question="noul"`` it is one statement per candidate that must
            use ``{choice_name}`` or ``{choice_description}``.
        question: ``"choice"`` reads one distribution over all candidates (one request; candidates
            share the probability mass); ``"noul"`` asks "is this candidate relevant?" once per
            candidate (n requests, run concurrently; each probability stands alone).
        threshold: the probability a candidate needs; default 0.2 for ``"choice"``, 0.5 for ``"noul"``.
        max_outputs: keep at most this many (the most probable).
        allow_empty: when nothing reaches the threshold, select nothing instead of the top candidate.
        labels: as for :class:`JevSingleSelector`; with ``question="noul"``, ``"names"`` means the words yes / no.
        sets: :class:`~jev_shared.DecisionSets` fitted on labelled answers of this choice (its option keys:
            the candidates' names): the selection is the answer's conformal set, most probable first, in
            place of ``threshold`` (an empty set: the top candidate, or nothing with ``allow_empty``).
    """

    prompt_type = PromptType.MULTI_SELECT
    base_variables = BASE_VARIABLES | {"max_outputs"}

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 prompt: BasePromptTemplate | str | None = None, question: QuestionKind = "choice",
                 threshold: float | None = None, max_outputs: int | None = None, allow_empty: bool = False,
                 labels: Labels | None = None, sets: DecisionSets | None = None) -> None:
        one_of("question", question, ("choice", "noul"))
        if sets is not None and (question != "choice" or not isinstance(sets, DecisionSets)):
            raise ValueError("sets: a DecisionSets, with question='choice' (one distribution over the candidates)")
        threshold = unit_interval("threshold", (0.2 if question == "choice" else 0.5) if threshold is None else threshold)
        if max_outputs is not None:
            int_at_least("max_outputs", max_outputs, 1)
        super().__init__(client, async_client, prompt, labels, question)
        self.threshold = threshold
        self.max_outputs = max_outputs
        self.allow_empty = allow_empty
        self.sets = sets

    @classmethod
    def default_template(cls, question: QuestionKind) -> str:
        return DEFAULT_MULTI_SELECT_TMPL if question == "choice" else DEFAULT_MULTI_NOUL_TMPL

    @classmethod
    def from_defaults(cls, client: Any = None, *, llm: Any = None, async_client: Any = None, model: str | None = None,
                      prompt_template_str: str | None = None, question: QuestionKind = "choice",
                      threshold: float | None = None, max_outputs: int | None = None, allow_empty: bool = False,
                      labels: Labels | None = None, sets: DecisionSets | None = None,
                      **client_kwargs: Any) -> JevMultiSelector:
        """As :meth:`JevSingleSelector.from_defaults`."""
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, prompt=prompt_template_str, question=question, threshold=threshold,
                   max_outputs=max_outputs, allow_empty=allow_empty, labels=labels, sets=sets)

    def _plan(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> Plan:
        cap = self.max_outputs or len(choices)
        if self.question == "choice":
            keys = option_keys(choices)
            if self.sets is not None and not self.sets.applies_to(dict.fromkeys(keys, 0.0)):
                raise ValueError(f"sets: fitted on the options {self.sets.options[:5]}, not these choices' keys "
                                 f"{keys[:5]}: refit them on this selector's answers (jev calibrate)")
            return choice_plan(choices, query, self._prompt, method=self._pair.method, labels=self.labels,
                               max_outputs=cap)
        return noul_plan(choices, query, self._prompt, labels=self.labels, max_outputs=cap)

    def _read(self, keys: list[str], resp: SystemOneResponse) -> tuple[dict[str, float], float | None, Pick]:
        confidence: float | None = None
        if self.question == "choice":
            answer = resp.answers[QUESTION_ID]
            assert isinstance(answer, ChoiceAnswer)
            probs, confidence = dict(answer.probabilities), answer.confidence
        else:
            probs = {k: _noul(resp, k) for k in keys}
        if self.sets is not None:
            return probs, confidence, self._set_pick(keys, probs)
        what = "probability" if self.question == "choice" else "probability of being relevant"
        return probs, confidence, multi_pick(keys, probs, threshold=self.threshold, max_outputs=self.max_outputs,
                                             allow_empty=self.allow_empty, what=what)

    def _set_pick(self, keys: list[str], probs: dict[str, float]) -> Pick:
        """The answer's decision set as the selection (capped at ``max_outputs``)."""
        assert self.sets is not None
        chosen = [keys.index(k) for k in self.sets.of(probs) if k in keys][:self.max_outputs]
        at = f"{self.sets.coverage:.0%}"
        if chosen or self.allow_empty:
            return Pick(chosen, [f"{keys[i]!r}: probability {probs[keys[i]]:.2f} is in the decision set at {at}"
                                 for i in chosen])
        top = max(range(len(keys)), key=lambda i: (probs[keys[i]], -i))
        return Pick([top], [f"{keys[top]!r}: probability {probs[keys[top]]:.2f} is the highest"],
                    note=f"the decision set at {at} is empty: kept the most probable candidate")


def _noul(resp: SystemOneResponse, key: str) -> float:
    answer = resp.answers[key]
    assert isinstance(answer, NoulAnswer)
    return answer.noul
