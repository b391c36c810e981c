"""JevRerank: reorder retrieved nodes by a relevance the model gives as a distribution.

LlamaIndex's ``LLMRerank`` asks the model to *write* "Doc: 3, Relevance: 7" lines for a batch of
nodes and parses them; a small model's text drops nodes or breaks the parser. Here the answer is
read from the logprobs of one token: no text is generated, no node is dropped. ``mode="list"`` (the
default) asks one ``Choice`` per batch of nodes, "which passage answers?", the nodes its options and
the query its state; ``"score"`` / ``"noul"`` ask one typed decision per node (the query and rubric
as the cached prefix, the node as the state), concurrently. Nodes are sorted by the relevance,
blended with the retrieval order by ``retrieval_weight`` (:mod:`.rerank_modes`).
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.callbacks import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher  # pyright: ignore[reportPrivateImportUsage]  # re-exported without __all__
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import NodeWithScore, QueryBundle

from jev_shared import (
    AsyncSystemOneClient,
    Choice,
    ClientCapabilityError,
    ClientPair,
    JevError,
    Noul,
    Score,
    SystemOneClient,
    SystemOneResponse,
)

from ._checks import int_at_least, unit_interval
from ._clients import client_pair, resolve_clients
from .postprocessor import aask_each, ask_each
from .rerank_modes import MAX_LIST_SIZE, aask_lists, ask_lists, batches, list_question
from .rerank_nodes import RERANK_METADATA_KEYS, in_retrieval_order, node_state, ranked, readings

__all__ = ["JevRerank", "DEFAULT_RERANK_SCORE_TMPL", "DEFAULT_RERANK_NOUL_TMPL", "DEFAULT_RERANK_LIST_TMPL",
           "DEFAULT_RELEVANCE_LEVELS", "DEFAULT_RETRIEVAL_WEIGHT", "RERANK_METADATA_KEYS"]

dispatcher = get_dispatcher(__name__)
logger = logging.getLogger(__name__)

DEFAULT_RERANK_SCORE_TMPL = "How well does the passage in the state answer this question? Question: {query_str}"
DEFAULT_RERANK_NOUL_TMPL = "The passage in the state answers this question, at least in part. Question: {query_str}"
#: mode="list": the query is the state, so the template needs no variable (it may still use {query_str}).
DEFAULT_RERANK_LIST_TMPL = "Which passage answers the question in the state?"
#: The retrieval order's share of the sort key: 0, the model's order (docs/llamaindex.md says why, and what the tuning split found).
DEFAULT_RETRIEVAL_WEIGHT = 0.0
Mode = Literal["list", "score", "noul"]
#: The relevance levels of ``mode="score"``, lowest first (the expected level, scaled to [0, 1], is the relevance).
DEFAULT_RELEVANCE_LEVELS = (
    "off topic: it does not touch the question",
    "on topic, but it does not answer the question",
    "it partly answers the question",
    "it answers the question",
)
_TEMPLATES = {"list": DEFAULT_RERANK_LIST_TMPL, "score": DEFAULT_RERANK_SCORE_TMPL, "noul": DEFAULT_RERANK_NOUL_TMPL}
QUESTION_ID = "relevance"


class JevRerank(BaseNodePostprocessor):
    """Sort retrieved nodes by relevance (one ``Choice`` over them, or a ``Score`` / ``Noul`` per node), keep ``top_n``.

    Each returned node is a copy whose ``score`` is the sort key in [0, 1] (the relevance blended with
    the retrieval order by ``retrieval_weight``) and whose metadata keeps the retrieval score and rank. On an engine error it raises (``on_error="raise"``) or returns the
    nodes in retrieval order, ``nodes[:top_n]`` (``"fallback"``, the default, as the hosted peer does),
    with the error in each node's ``jev_rerank_error``.
    """

    top_n: int = Field(default=10, description="How many nodes to return (LLMRerank's default).")
    mode: Mode = Field(default="list", description="One choice over the nodes, or relevance levels / yes-no per node.")
    prompt: str = Field(default="", description="The question's instructions; score and noul must use {query_str}.")
    levels: list[str] = Field(default_factory=lambda: list(DEFAULT_RELEVANCE_LEVELS),
                              description="mode='score': the relevance levels, lowest first (2 to 10).")
    min_confidence: float | None = Field(default=None, description="Flag (never drop) nodes judged less surely.")
    on_error: Literal["fallback", "raise"] = Field(default="fallback", description="On an engine error.")
    max_concurrency: int | None = Field(default=None, description="Calls in flight at once; None: the client's.")
    retrieval_weight: float = Field(default=DEFAULT_RETRIEVAL_WEIGHT,
                                    description="The retrieval order's share of the sort key, in [0, 1]; 0: the model's alone.")
    list_size: int = Field(default=10, description="mode='list': nodes per question (2 to 26), LLMRerank's batch.")
    _pair: ClientPair = PrivateAttr()

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 top_n: int = 10, mode: Mode = "list", prompt: str | None = None,
                 levels: list[str] | tuple[str, ...] | None = None, min_confidence: float | None = None,
                 on_error: Literal["fallback", "raise"] = "fallback", max_concurrency: int | None = None,
                 retrieval_weight: float = DEFAULT_RETRIEVAL_WEIGHT, list_size: int = 10, **kwargs: Any) -> None:
        if prompt is None:
            prompt = _TEMPLATES.get(mode, DEFAULT_RERANK_SCORE_TMPL)  # an unknown mode is pydantic's to refuse
        fields: dict[str, Any] = {  # validated by pydantic (a dict, since the base's __init__ declares none)
            "top_n": top_n, "mode": mode, "prompt": prompt, "min_confidence": min_confidence, "on_error": on_error,
            "levels": list(DEFAULT_RELEVANCE_LEVELS if levels is None else levels), "max_concurrency": max_concurrency,
            "retrieval_weight": retrieval_weight, "list_size": list_size}
        super().__init__(**fields, **kwargs)
        if self.mode != "list" and "query_str" not in PromptTemplate(self.prompt).template_vars:
            raise ValueError(f"prompt: mode={self.mode!r} judges each node alone, so the prompt must use "
                             f"{{query_str}}, got {self.prompt!r}")
        self._pair = client_pair(client, async_client, type(self).__name__)

    @field_validator("top_n")
    @classmethod
    def _top_n_positive(cls, value: int) -> int:
        int_at_least("top_n", value, 1)
        return value

    @field_validator("max_concurrency")
    @classmethod
    def _concurrency_positive(cls, value: int | None) -> int | None:
        """Each node in flight keeps a server slot; a server caches the prefix once per slot it lands on."""
        if value is not None:
            int_at_least("max_concurrency", value, 1)
        return value

    @field_validator("prompt")
    @classmethod
    def _prompt_names_the_query(cls, value: str) -> str:
        """The query is the only thing a template can be filled with (``__init__`` checks it is there where needed)."""
        if not set(PromptTemplate(value).template_vars) <= {"query_str"}:
            raise ValueError(f"prompt: may use {{query_str}} and no other variable, got {value!r}")
        return value

    @field_validator("retrieval_weight")
    @classmethod
    def _weight_in_unit_interval(cls, value: float) -> float:
        return unit_interval("retrieval_weight", value)

    @field_validator("list_size")
    @classmethod
    def _list_size_in_range(cls, value: int) -> int:
        if not 2 <= value <= MAX_LIST_SIZE:
            raise ValueError(f"list_size: 2 to {MAX_LIST_SIZE} nodes per question (one letter each), got {value}")
        return value

    @field_validator("levels")
    @classmethod
    def _levels_in_range(cls, value: list[str]) -> list[str]:
        if not 2 <= len(value) <= 10:
            raise ValueError(f"levels: 2 to 10 relevance levels, lowest first, got {len(value)}")
        return value

    @field_validator("min_confidence")
    @classmethod
    def _confidence_in_unit_interval(cls, value: float | None) -> float | None:
        return None if value is None else unit_interval("min_confidence", value)

    @classmethod
    def class_name(cls) -> str:
        return "JevRerank"

    @classmethod
    def from_defaults(cls, client: Any = None, *, llm: Any = None, async_client: Any = None, model: str | None = None,
                      top_n: int = 10, mode: Mode = "list", prompt: str | None = None,
                      levels: list[str] | tuple[str, ...] | None = None, min_confidence: float | None = None,
                      on_error: Literal["fallback", "raise"] = "fallback", max_concurrency: int | None = None,
                      retrieval_weight: float = DEFAULT_RETRIEVAL_WEIGHT, list_size: int = 10,
                      **client_kwargs: Any) -> JevRerank:
        """From an engine client, an OpenAI-compatible client (with ``model=``), or a LlamaIndex ``llm``.

        Clients built here default to ``debias=False``: a lean the model has on every node of a query
        moves them all alike, and measuring it would cost three calls per query (the query is in the prompt).
        """
        client_kwargs.setdefault("debias", False)
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, top_n=top_n, mode=mode, prompt=prompt, levels=levels,
                   min_confidence=min_confidence, on_error=on_error, max_concurrency=max_concurrency,
                   retrieval_weight=retrieval_weight, list_size=list_size)

    # -- prompts, as LlamaIndex's rerankers expose theirs ------------------------------------------

    def _get_prompts(self) -> PromptDictType:
        return {"prompt": PromptTemplate(self.prompt)}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "prompt" in prompts:
            self.prompt = prompts["prompt"].get_template()

    # -- the plan, shared by sync and async --------------------------------------------------------

    def question(self, query_str: str) -> Noul | Score:
        """``score`` / ``noul``: the one question every node of this query is asked, the query in the rubric."""
        instructions = PromptTemplate(self.prompt).format(query_str=query_str)
        if self.mode == "noul":
            return Noul(instructions=instructions)
        return Score(instructions=instructions, criteria=list(self.levels))

    def list_calls(self, nodes: list[NodeWithScore], query_str: str) -> list[tuple[range, dict[str, Choice]]]:
        """``list``: per batch of nodes, its indices and the one question over them (asked of the query)."""
        instructions = PromptTemplate(self.prompt).format(query_str=query_str)
        return [(b, {QUESTION_ID: list_question(instructions, [node_state(nodes[i]) for i in b])})
                for b in batches(len(nodes), self.list_size)]

    def _start(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> QueryBundle:
        dispatcher.event(ReRankStartEvent(query=query_bundle, nodes=nodes, top_n=self.top_n,
                                          model_name=self._pair.model))
        if query_bundle is None:
            raise ValueError("JevRerank judges nodes against the query: pass query_bundle= or query_str=")
        return query_bundle

    def _payload(self, nodes: list[NodeWithScore], query: QueryBundle) -> dict[str, Any]:
        return {EventPayload.NODES: nodes, EventPayload.MODEL_NAME: self._pair.model,
                EventPayload.QUERY_STR: query.query_str, EventPayload.TOP_K: self.top_n}

    def _ranked(self, nodes: list[NodeWithScore], resps: list[SystemOneResponse]) -> list[NodeWithScore]:
        """Copies of the nodes, highest sort key first (ties keep retrieval order), cut at ``top_n``."""
        read = readings(self.mode, nodes, resps, self.list_size, QUESTION_ID)
        return ranked(nodes, read, self.top_n, self.retrieval_weight, self.min_confidence)

    def _ask(self, nodes: list[NodeWithScore], query_str: str) -> list[SystemOneResponse]:
        if self.mode != "list":
            return ask_each(self._pair, [node_state(n) for n in nodes], {QUESTION_ID: self.question(query_str)},
                            self.max_concurrency)
        return ask_lists(self._pair, query_str, [q for _, q in self.list_calls(nodes, query_str)], self.max_concurrency)

    async def _aask(self, nodes: list[NodeWithScore], query_str: str) -> list[SystemOneResponse]:
        if self.mode != "list":
            return await aask_each(self._pair, [node_state(n) for n in nodes], {QUESTION_ID: self.question(query_str)},
                                   self.max_concurrency)
        questions = [q for _, q in self.list_calls(nodes, query_str)]
        return await aask_lists(self._pair, query_str, questions, self.max_concurrency)

    def _fallback(self, nodes: list[NodeWithScore], exc: JevError) -> list[NodeWithScore]:
        """Retrieval order, ``nodes[:top_n]``, each saying why; ``on_error="raise"`` (or misuse) raises."""
        if self.on_error == "raise" or isinstance(exc, ClientCapabilityError):
            raise exc
        logger.warning("JevRerank fell back to retrieval order: %s: %s", type(exc).__name__, exc)
        return in_retrieval_order(nodes[: self.top_n], f"{type(exc).__name__}: {exc}")

    # -- the thin sync and async shells ------------------------------------------------------------

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = self._start(nodes, query_bundle)
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            try:
                out = self._ranked(nodes, self._ask(nodes, query.query_str))
            except JevError as exc:
                out = self._fallback(nodes, exc)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = self._start(nodes, query_bundle)
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            try:
                out = self._ranked(nodes, await self._aask(nodes, query.query_str))
            except JevError as exc:
                out = self._fallback(nodes, exc)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

