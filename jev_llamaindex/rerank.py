"""JevRerank: reorder retrieved nodes by a relevance the model gives as a distribution.

LlamaIndex's ``LLMRerank`` asks the model to *write* "Doc: 3, Relevance: 7" lines for a batch of
nodes and parses them; a small model's text drops nodes or breaks the parser. Here each node is
one typed decision, a ``Score`` over relevance levels (or a yes/no ``Noul``), read from the logprobs
of one answer token: no text is generated, no node is dropped. The query and the rubric are the
question (the system message, one prefix that the server caches across the nodes of a query); the
node's text is the state. Nodes are judged concurrently and sorted by the calibrated relevance.
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
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from jev_shared import (
    AsyncSystemOneClient,
    ClientCapabilityError,
    ClientPair,
    JevError,
    Noul,
    Score,
    SystemOneClient,
    SystemOneResponse,
    answer_confidence,
)

from ._checks import int_at_least, unit_interval
from ._clients import client_pair, resolve_clients
from .postprocessor import aask_each, ask_each, relevance

__all__ = ["JevRerank", "DEFAULT_RERANK_SCORE_TMPL", "DEFAULT_RERANK_NOUL_TMPL", "DEFAULT_RELEVANCE_LEVELS",
           "RERANK_METADATA_KEYS"]

dispatcher = get_dispatcher(__name__)
logger = logging.getLogger(__name__)

DEFAULT_RERANK_SCORE_TMPL = "How well does the passage in the state answer this question? Question: {query_str}"
DEFAULT_RERANK_NOUL_TMPL = "The passage in the state answers this question, at least in part. Question: {query_str}"
#: The relevance levels of ``mode="score"``, lowest first (the expected level, scaled to [0, 1], is the relevance).
DEFAULT_RELEVANCE_LEVELS = (
    "off topic: it does not touch the question",
    "on topic, but it does not answer the question",
    "it partly answers the question",
    "it answers the question",
)
#: What JevRerank writes into each returned node's metadata (kept out of the LLM's and the embedder's text).
RERANK_METADATA_KEYS = ("retrieval_score", "retrieval_rank", "jev_relevance", "jev_confidence",
                        "jev_low_confidence", "jev_rerank_error")
QUESTION_ID = "relevance"


class JevRerank(BaseNodePostprocessor):
    """Sort retrieved nodes by relevance (a ``Score`` or a ``Noul`` per node) and keep the ``top_n``.

    Each returned node is a copy whose ``score`` is its relevance in [0, 1] and whose metadata keeps
    the retrieval score and rank. On an engine error it raises (``on_error="raise"``) or returns the
    nodes in retrieval order, ``nodes[:top_n]`` (``"fallback"``, the default, as the hosted peer does),
    with the error in each node's ``jev_rerank_error``.
    """

    top_n: int = Field(default=10, description="How many nodes to return (LLMRerank's default).")
    mode: Literal["score", "noul"] = Field(default="score", description="Relevance levels, or yes/no.")
    prompt: str = Field(default="", description="The question's instructions; must use {query_str}.")
    levels: list[str] = Field(default_factory=lambda: list(DEFAULT_RELEVANCE_LEVELS),
                              description="mode='score': the relevance levels, lowest first (2 to 10).")
    min_confidence: float | None = Field(default=None, description="Flag (never drop) nodes judged less surely.")
    on_error: Literal["fallback", "raise"] = Field(default="fallback", description="On an engine error.")
    max_concurrency: int | None = Field(default=None, description="Nodes judged at once; None: the client's.")
    _pair: ClientPair = PrivateAttr()

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 top_n: int = 10, mode: Literal["score", "noul"] = "score", prompt: str | None = None,
                 levels: list[str] | tuple[str, ...] | None = None, min_confidence: float | None = None,
                 on_error: Literal["fallback", "raise"] = "fallback", max_concurrency: int | None = None,
                 **kwargs: Any) -> None:
        if prompt is None:
            prompt = DEFAULT_RERANK_NOUL_TMPL if mode == "noul" else DEFAULT_RERANK_SCORE_TMPL
        fields: dict[str, Any] = {  # validated by pydantic (a dict, since the base's __init__ declares none)
            "top_n": top_n, "mode": mode, "prompt": prompt, "min_confidence": min_confidence, "on_error": on_error,
            "levels": list(DEFAULT_RELEVANCE_LEVELS if levels is None else levels), "max_concurrency": max_concurrency}
        super().__init__(**fields, **kwargs)
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
        """The query is the shared prefix, so a template without it would judge nodes against nothing."""
        if set(PromptTemplate(value).template_vars) != {"query_str"}:
            raise ValueError(f"prompt: must use {{query_str}} and no other variable, got {value!r}")
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
                      top_n: int = 10, mode: Literal["score", "noul"] = "score", prompt: str | None = None,
                      levels: list[str] | tuple[str, ...] | None = None, min_confidence: float | None = None,
                      on_error: Literal["fallback", "raise"] = "fallback", max_concurrency: int | None = None,
                      **client_kwargs: Any) -> JevRerank:
        """From an engine client, an OpenAI-compatible client (with ``model=``), or a LlamaIndex ``llm``.

        Clients built here default to ``debias=False``: a lean the model has on every node of a query
        moves them all alike, and measuring it would cost three calls per query (the query is in the prompt).
        """
        client_kwargs.setdefault("debias", False)
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, top_n=top_n, mode=mode, prompt=prompt, levels=levels,
                   min_confidence=min_confidence, on_error=on_error, max_concurrency=max_concurrency)

    # -- prompts, as LlamaIndex's rerankers expose theirs ------------------------------------------

    def _get_prompts(self) -> PromptDictType:
        return {"prompt": PromptTemplate(self.prompt)}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        if "prompt" in prompts:
            self.prompt = prompts["prompt"].get_template()

    # -- the plan, shared by sync and async --------------------------------------------------------

    def question(self, query_str: str) -> Noul | Score:
        """The one question every node of this query is asked: the rubric with the query in it."""
        instructions = PromptTemplate(self.prompt).format(query_str=query_str)
        if self.mode == "noul":
            return Noul(instructions=instructions)
        return Score(instructions=instructions, criteria=list(self.levels))

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
        """Copies of the nodes, most relevant first (ties keep retrieval order), cut at ``top_n``."""
        judged = []
        for rank, (n, resp) in enumerate(zip(nodes, resps)):
            answer = resp.answers[QUESTION_ID]
            p, conf = relevance(answer), answer_confidence(answer)
            extra: dict[str, Any] = {"jev_relevance": p, "jev_confidence": conf}
            if self.min_confidence is not None:
                extra["jev_low_confidence"] = conf < self.min_confidence
            judged.append(_copy(n, rank, p, extra))
        judged.sort(key=lambda n: -(n.score or 0.0))
        return judged[: self.top_n]

    def _fallback(self, nodes: list[NodeWithScore], exc: JevError) -> list[NodeWithScore]:
        """Retrieval order, ``nodes[:top_n]``, each saying why; ``on_error="raise"`` (or misuse) raises."""
        if self.on_error == "raise" or isinstance(exc, ClientCapabilityError):
            raise exc
        logger.warning("JevRerank fell back to retrieval order: %s: %s", type(exc).__name__, exc)
        error = f"{type(exc).__name__}: {exc}"
        return [_copy(n, rank, n.score, {"jev_rerank_error": error}) for rank, n in enumerate(nodes[: self.top_n])]

    # -- the thin sync and async shells ------------------------------------------------------------

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = self._start(nodes, query_bundle)
        states = [_state(n) for n in nodes]
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            try:
                out = self._ranked(nodes, ask_each(self._pair, states, {QUESTION_ID: self.question(query.query_str)},
                                                       self.max_concurrency))
            except JevError as exc:
                out = self._fallback(nodes, exc)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = self._start(nodes, query_bundle)
        states = [_state(n) for n in nodes]
        with self.callback_manager.event(CBEventType.RERANKING, payload=self._payload(nodes, query)) as event:
            try:
                resps = await aask_each(self._pair, states, {QUESTION_ID: self.question(query.query_str)},
                                        self.max_concurrency)
                out = self._ranked(nodes, resps)
            except JevError as exc:
                out = self._fallback(nodes, exc)
            event.on_end(payload={EventPayload.NODES: out})
        dispatcher.event(ReRankEndEvent(nodes=out))
        return out


def _state(n: NodeWithScore) -> str:
    """What the model reads of a node: its text with the metadata meant for an LLM (ours excluded)."""
    return n.node.get_content(metadata_mode=MetadataMode.LLM)


def _copy(n: NodeWithScore, rank: int, score: float | None, extra: dict[str, Any]) -> NodeWithScore:
    """A copy of the node (the docstore's stays as it was) with the retrieval facts and ``extra`` in metadata."""
    node = n.node.model_copy()
    node.metadata = {**n.node.metadata, "retrieval_score": n.score, "retrieval_rank": rank, **extra}
    hidden = [k for k in RERANK_METADATA_KEYS if k not in n.node.excluded_llm_metadata_keys]
    node.excluded_llm_metadata_keys = [*n.node.excluded_llm_metadata_keys, *hidden]
    node.excluded_embed_metadata_keys = [*n.node.excluded_embed_metadata_keys,
                                         *(k for k in RERANK_METADATA_KEYS if k not in n.node.excluded_embed_metadata_keys)]
    return NodeWithScore(node=node, score=score)

