"""Selectors for ``RouterQueryEngine`` and ``RouterRetriever`` that read a distribution, not a guess.

LlamaIndex's own selectors ask the LLM to *write* its pick (a number and a reason) and parse it.
These ask the engine a typed question instead: the candidates' names and descriptions become the
options of a :class:`~jev_shared.Choice` (or one :class:`~jev_shared.Noul` per candidate), the
query is the state, and the answer is a probability for every candidate. The pick, its
probability and the confidence are then facts a caller can act on: fall back below a confidence,
keep every candidate above a threshold, or log the full distribution.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from llama_index.core.base.base_selector import BaseSelector, MultiSelection, SingleSelection
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.prompts.prompt_type import PromptType
from llama_index.core.schema import QueryBundle
from llama_index.core.tools.query_engine import DEFAULT_NAME as QUERY_ENGINE_TOOL_NAME
from llama_index.core.tools.retriever_tool import DEFAULT_NAME as RETRIEVER_TOOL_NAME
from llama_index.core.tools.types import ToolMetadata

from jev_shared import (
    AsyncSystemOneClient,
    Choice,
    ChoiceAnswer,
    InvalidQuestionError,
    JevError,
    Noul,
    NoulAnswer,
    SystemOneClient,
    SystemOneResponse,
)

from ._clients import Asker, resolve_clients

__all__ = [
    "JevSingleSelector",
    "JevMultiSelector",
    "JevSelectorResult",
    "JevSelectionEvent",
    "LowConfidenceError",
    "DEFAULT_SINGLE_SELECT_TMPL",
    "DEFAULT_MULTI_SELECT_TMPL",
    "DEFAULT_MULTI_NOUL_TMPL",
    "option_keys",
]

dispatcher = get_dispatcher(__name__)

#: The question id of the single-choice question (what ``debug["methods"]`` is keyed by).
QUESTION_ID = "route"
#: Letters A..Z: past this many options one label token cannot name them all.
ONE_TOKEN_LABELS = 26
TOKEN_METHODS = ("logprobs", "grammar")
Labels = Literal["letters", "names"]
#: The names LlamaIndex gives tools built without one: placeholders, not names.
PLACEHOLDER_NAMES = frozenset({QUERY_ENGINE_TOOL_NAME, RETRIEVER_TOOL_NAME})

DEFAULT_SINGLE_SELECT_TMPL = (
    "The options are {num_choices} tools, each with a summary of what it can answer. Which tool is the "
    "most relevant to answer the user's question given as the state?"
)
DEFAULT_MULTI_SELECT_TMPL = (
    "The options are {num_choices} tools, each with a summary of what it can answer. Which tool is the "
    "most relevant to answer the user's question given as the state? More than one may be relevant."
)
DEFAULT_MULTI_NOUL_TMPL = (
    "The tool '{choice_name}' is relevant to answer the user's question given as the state. "
    "The tool's summary: {choice_description}"
)


class JevSelectorResult(MultiSelection):
    """A ``SelectorResult`` that also carries the distribution it was read from.

    ``RouterQueryEngine`` puts it in ``response.metadata["selector_result"]``.
    """

    #: The option key of each candidate, by index: its tool name, or ``choice_1``... when names are missing.
    keys: list[str] = Field(default_factory=list)
    #: Probability per key: a distribution for ``question="choice"``; independent P(relevant) for ``"noul"``.
    probabilities: dict[str, float] = Field(default_factory=dict)
    #: The choice answer's confidence; None for per-candidate nouls.
    confidence: float | None = None
    question: Literal["choice", "noul"] = "choice"
    #: The readout method that answered (``logprobs``, ``structured``, ...), from the engine's debug.
    method: str | None = None
    #: Why the selection differs from the plain pick (a fallback), or None.
    note: str | None = None
    #: The engine's whole response: answers, usage, debug.
    response: SystemOneResponse | None = Field(default=None, repr=False)

    @property
    def distribution(self) -> list[float]:
        """The probabilities in candidate order (index i is choice i)."""
        return [self.probabilities[k] for k in self.keys]


class JevSelectionEvent(BaseEvent):
    """Emitted through LlamaIndex instrumentation on every selection (also one that then raises)."""

    selector: str
    query_str: str
    result: JevSelectorResult

    @classmethod
    def class_name(cls) -> str:
        return "JevSelectionEvent"


class LowConfidenceError(JevError):
    """The pick's confidence is below ``min_confidence`` and there is no ``default_index`` to fall back to."""

    def __init__(self, message: str, *, result: JevSelectorResult) -> None:
        self.result = result
        super().__init__(message)


def option_keys(choices: Sequence[ToolMetadata]) -> list[str]:
    """Option keys for the candidates: their names, or ``choice_1``... when any name is missing.

    LlamaIndex names unnamed tools ``query_engine_tool`` / ``retriever_tool``; those count as
    missing, so routers built without names (as in LlamaIndex's own router examples) still work.
    Real names are what the model reads beside each description, so duplicates would make two
    candidates indistinguishable: they are rejected rather than silently merged.
    """
    if not choices:
        raise InvalidQuestionError("there are no choices to select from; pass at least one tool", field="choices")
    if not _all_named(choices):
        return [f"choice_{i + 1}" for i in range(len(choices))]
    names = [(c.name or "").strip() for c in choices]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InvalidQuestionError(
            f"duplicate tool names {dupes}: each candidate needs a unique ToolMetadata.name", field="choices"
        )
    return names


def _all_named(choices: Sequence[ToolMetadata]) -> bool:
    return all((c.name or "").strip() not in PLACEHOLDER_NAMES | {""} for c in choices)


def _description(choice: ToolMetadata) -> str:
    return " ".join((choice.description or "").split())


class _JevSelector(BaseSelector):
    """What both selectors share: clients, the customisable prompt, events."""

    prompt_type: ClassVar[PromptType]
    #: The template variables the selector fills.
    variables: frozenset[str] = frozenset({"query_str", "num_choices", "context_list"})

    def __init__(self, client: SystemOneClient | None, async_client: AsyncSystemOneClient | None,
                 prompt: BasePromptTemplate | str | None, default_template: str, labels: Labels | None) -> None:
        if labels not in (None, "letters", "names"):
            raise ValueError(f"labels: must be None, 'letters' or 'names', got {labels!r}")
        self.labels = labels
        for given, kind in ((client, SystemOneClient), (async_client, AsyncSystemOneClient)):
            if given is not None and not isinstance(given, kind):
                raise TypeError(
                    f"{type(self).__name__}: expected a {kind.__name__}, got {type(given).__name__}; "
                    f"{type(self).__name__}.from_defaults(client=..., model=...) wraps other clients"
                )
        self._asker = Asker(client, async_client, type(self).__name__)
        self._prompt = self._checked(prompt if prompt is not None else default_template)

    # -- prompts, as LlamaIndex's own selectors expose them ------------------------------------

    def _get_prompts(self) -> dict[str, Any]:
        return {"prompt": self._prompt}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "prompt" in prompts:
            self._prompt = self._checked(prompts["prompt"])

    def _checked(self, prompt: BasePromptTemplate | str) -> BasePromptTemplate:
        """Reject template variables the selector cannot fill, instead of sending '{foo}' to the model."""
        if isinstance(prompt, str):
            prompt = PromptTemplate(prompt, prompt_type=self.prompt_type)
        filled = self.variables | set(prompt.kwargs) | set((prompt.template_var_mappings or {}).values())
        unknown = sorted(set(prompt.template_vars) - filled)
        if unknown:
            raise ValueError(
                f"{type(self).__name__}: the prompt has template variables {unknown} that the selector cannot "
                f"fill; it fills {sorted(self.variables)}"
            )
        return prompt

    def _instructions(self, **values: Any) -> str:
        return self._prompt.format(**values)

    # -- the question ------------------------------------------------------------------------------

    def _choice(self, choices: Sequence[ToolMetadata], query: QueryBundle,
                **values: Any) -> tuple[list[str], Choice, dict[str, Any]]:
        """The candidates as one Choice; JSON readout past 26 options if the client's method reads one token."""
        keys = option_keys(choices)
        criteria = {k: _description(c) for k, c in zip(keys, choices)}
        context = "\n".join(f"({i + 1}) {k}: {d}" for i, (k, d) in enumerate(criteria.items()))
        text = self._instructions(query_str=query.query_str, num_choices=len(keys), context_list=context, **values)
        kw = self._call_options()
        if len(keys) > ONE_TOKEN_LABELS and self._asker.method in TOKEN_METHODS:
            kw["method"] = "structured"
        return keys, Choice(instructions=text, criteria=criteria), kw

    def _call_options(self) -> dict[str, Any]:
        """Per-call engine options: ``labels`` when set here, else the client's own setting."""
        return {} if self.labels is None else {"labels": self.labels}

    def _result(self, keys: list[str], resp: SystemOneResponse, probs: dict[str, float], picked: list[int],
                reasons: list[str], *, confidence: float | None, question: Literal["choice", "noul"],
                note: str | None) -> JevSelectorResult:
        methods = (resp.debug or {}).get("methods", {})
        return JevSelectorResult(
            selections=[SingleSelection(index=i, reason=r) for i, r in zip(picked, reasons)],
            keys=keys, probabilities=probs, confidence=confidence, question=question,
            method=methods.get(QUESTION_ID) or next(iter(methods.values()), None), note=note, response=resp,
        )

    def _emit(self, query: QueryBundle, result: JevSelectorResult) -> None:
        dispatcher.event(JevSelectionEvent(selector=type(self).__name__, query_str=query.query_str, result=result))


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
        if not 0.0 <= min_confidence <= 1.0:
            raise ValueError(f"min_confidence: must lie in [0, 1], got {min_confidence}")
        if default_index is not None and (not isinstance(default_index, int) or default_index < 0):
            raise ValueError(f"default_index: must be an integer >= 0, got {default_index!r}")
        super().__init__(client, async_client, prompt, DEFAULT_SINGLE_SELECT_TMPL, labels)
        self.min_confidence = min_confidence
        self.default_index = default_index

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

    def _select(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> JevSelectorResult:
        keys, question, kw = self._prepare(choices, query)
        return self._finish(keys, self._asker.ask(query.query_str, {QUESTION_ID: question}, **kw), query)

    async def _aselect(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> JevSelectorResult:
        keys, question, kw = self._prepare(choices, query)
        return self._finish(keys, await self._asker.aask(query.query_str, {QUESTION_ID: question}, **kw), query)

    def _prepare(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> tuple[list[str], Choice, dict[str, Any]]:
        if self.default_index is not None and self.default_index >= len(choices):
            raise ValueError(f"default_index: {self.default_index} is out of range for {len(choices)} choices")
        return self._choice(choices, query)

    def _finish(self, keys: list[str], resp: SystemOneResponse, query: QueryBundle) -> JevSelectorResult:
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, ChoiceAnswer)
        probs, conf = answer.probabilities, answer.confidence
        best = keys.index(answer.choice)
        reason = _single_reason(keys, probs, best, conf)
        low = conf < self.min_confidence
        if low and self.default_index is None:
            result = self._result(keys, resp, probs, [best], [reason], confidence=conf, question="choice",
                                  note="below min_confidence")
            self._emit(query, result)
            raise LowConfidenceError(
                f"confidence {conf:.2f} is below min_confidence {self.min_confidence:.2f} (top choice "
                f"{answer.choice!r} at probability {probs[answer.choice]:.2f}); pass default_index= to fall back "
                "instead of raising",
                result=result,
            )
        note = None
        picked = best
        if low:
            assert self.default_index is not None
            picked = self.default_index
            fallback = keys[picked]
            note = f"confidence {conf:.2f} < min_confidence {self.min_confidence:.2f}: fell back to default_index"
            reason = (f"Fell back to default_index {picked} ({fallback!r}, probability {probs[fallback]:.2f}): the top "
                      f"choice {answer.choice!r} had probability {probs[answer.choice]:.2f}, but confidence "
                      f"{conf:.2f} is below min_confidence {self.min_confidence:.2f}")
        result = self._result(keys, resp, probs, [picked], [reason], confidence=conf, question="choice", note=note)
        self._emit(query, result)
        return result


def _single_reason(keys: list[str], probs: dict[str, float], best: int, confidence: float) -> str:
    key = keys[best]
    text = f"Chose {key!r} with probability {probs[key]:.2f} and confidence {confidence:.2f} over {len(keys)} choices"
    others = sorted((k for k in keys if k != key), key=lambda k: -probs[k])
    return text + (f"; next was {others[0]!r} at {probs[others[0]]:.2f}" if others else "")


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
    """

    prompt_type = PromptType.MULTI_SELECT

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 prompt: BasePromptTemplate | str | None = None, question: Literal["choice", "noul"] = "choice",
                 threshold: float | None = None, max_outputs: int | None = None, allow_empty: bool = False,
                 labels: Labels | None = None) -> None:
        if question not in ("choice", "noul"):
            raise ValueError(f"question: must be 'choice' or 'noul', got {question!r}")
        threshold = (0.2 if question == "choice" else 0.5) if threshold is None else threshold
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold: must lie in [0, 1], got {threshold}")
        if max_outputs is not None and (not isinstance(max_outputs, int) or max_outputs < 1):
            raise ValueError(f"max_outputs: must be an integer >= 1, got {max_outputs!r}")
        self.question: Literal["choice", "noul"] = question
        per_candidate = {"choice_name", "choice_description"} if question == "noul" else set()
        self.variables = _JevSelector.variables | {"max_outputs"} | per_candidate
        self.threshold = threshold
        self.max_outputs = max_outputs
        self.allow_empty = allow_empty
        default = DEFAULT_MULTI_SELECT_TMPL if question == "choice" else DEFAULT_MULTI_NOUL_TMPL
        super().__init__(client, async_client, prompt, default, labels)

    @classmethod
    def from_defaults(cls, client: Any = None, *, llm: Any = None, async_client: Any = None, model: str | None = None,
                      prompt_template_str: str | None = None, question: Literal["choice", "noul"] = "choice",
                      threshold: float | None = None, max_outputs: int | None = None, allow_empty: bool = False,
                      labels: Labels | None = None, **client_kwargs: Any) -> JevMultiSelector:
        """As :meth:`JevSingleSelector.from_defaults`."""
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, prompt=prompt_template_str, question=question, threshold=threshold,
                   max_outputs=max_outputs, allow_empty=allow_empty, labels=labels)

    def _checked(self, prompt: BasePromptTemplate | str) -> BasePromptTemplate:
        prompt = super()._checked(prompt)
        if self.question == "noul" and not {"choice_name", "choice_description"} & set(prompt.template_vars):
            raise ValueError(
                "JevMultiSelector(question='noul'): the prompt is one statement per candidate, so it must use "
                "{choice_name} or {choice_description}"
            )
        return prompt

    def _questions(self, choices: Sequence[ToolMetadata],
                   query: QueryBundle) -> tuple[list[str], dict[str, Choice | Noul], dict[str, Any]]:
        cap = self.max_outputs or len(choices)
        if self.question == "choice":
            keys, choice, kw = self._choice(choices, query, max_outputs=cap)
            return keys, {QUESTION_ID: choice}, kw
        keys = option_keys(choices)
        nouls: dict[str, Choice | Noul] = {
            k: Noul(instructions=self._instructions(query_str=query.query_str, num_choices=len(keys), max_outputs=cap,
                                                    choice_name=k, choice_description=_description(c)))
            for k, c in zip(keys, choices)
        }
        return keys, nouls, self._call_options()

    def _select(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> JevSelectorResult:
        keys, questions, kw = self._questions(choices, query)
        return self._finish(keys, self._asker.ask(query.query_str, questions, **kw), query)

    async def _aselect(self, choices: Sequence[ToolMetadata], query: QueryBundle) -> JevSelectorResult:
        keys, questions, kw = self._questions(choices, query)
        return self._finish(keys, await self._asker.aask(query.query_str, questions, **kw), query)

    def _finish(self, keys: list[str], resp: SystemOneResponse, query: QueryBundle) -> JevSelectorResult:
        confidence: float | None = None
        if self.question == "choice":
            answer = resp.answers[QUESTION_ID]
            assert isinstance(answer, ChoiceAnswer)
            probs, confidence = dict(answer.probabilities), answer.confidence
        else:
            probs = {}
            for k in keys:
                noul = resp.answers[k]
                assert isinstance(noul, NoulAnswer)
                probs[k] = noul.noul
        ranked = sorted(range(len(keys)), key=lambda i: (-probs[keys[i]], i))
        picked = [i for i in ranked if probs[keys[i]] >= self.threshold][: self.max_outputs]
        what = "probability" if self.question == "choice" else "probability of being relevant"
        reasons = [f"{keys[i]!r}: {what} {probs[keys[i]]:.2f} >= threshold {self.threshold:.2f}" for i in picked]
        note = None
        if not picked and not self.allow_empty:
            top = ranked[0]
            picked = [top]
            note = f"no candidate reached threshold {self.threshold:.2f}: kept the most probable one"
            reasons = [f"{keys[top]!r}: {what} {probs[keys[top]]:.2f} is the highest, though below threshold "
                       f"{self.threshold:.2f}"]
        result = self._result(keys, resp, probs, picked, reasons, confidence=confidence, question=self.question,
                              note=note)
        self._emit(query, result)
        return result
