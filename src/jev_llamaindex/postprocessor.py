"""A node postprocessor that keeps the retrieved nodes a typed question judges relevant.

Similarity scores say how close a node is to the query, not whether it answers it. This filter
asks the model, per node, a :class:`~jev_shared.Noul` ("this passage helps answer the question")
or a :class:`~jev_shared.Score` (levels of relevance), reads a probability rather than a verdict,
and keeps the nodes at or above ``threshold`` with that probability as their score.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from jev_shared import (
    Answer,
    AsyncSystemOneClient,
    ClientPair,
    Noul,
    NoulAnswer,
    Score,
    ScoreAnswer,
    SystemOneClient,
    SystemOneResponse,
)

from ._checks import unit_interval
from ._clients import client_pair, resolve_clients

__all__ = ["JevRelevanceFilter", "DEFAULT_RELEVANCE_NOUL", "relevance"]

DEFAULT_RELEVANCE_NOUL = (
    "The passage in the state contains information that helps answer the question in the state."
)
QUESTION_ID = "relevant"


def relevance(answer: Answer) -> float:
    """One number in [0, 1]: P(true) for a noul, the expected level scaled to [0, 1] for a score."""
    if isinstance(answer, NoulAnswer):
        return answer.noul
    assert isinstance(answer, ScoreAnswer)
    return answer.score / (len(answer.legend) - 1)


class JevRelevanceFilter(BaseNodePostprocessor):
    """Keep the nodes whose relevance (a Noul's probability, or a Score scaled to [0, 1]) reaches ``threshold``.

    Kept nodes keep their retrieval order; each one's ``score`` becomes its relevance.
    """

    threshold: float = Field(default=0.5, description="Relevance a node needs to be kept, in [0, 1].")
    _pair: ClientPair = PrivateAttr()
    _question: Noul | Score = PrivateAttr()

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 question: Noul | Score | None = None, threshold: float = 0.5, **kwargs: Any) -> None:
        super().__init__(threshold=threshold, **kwargs)  # pyright: ignore[reportCallIssue]  # pyright checks the parent's synthesized __init__, not this model's fields
        self._pair = client_pair(client, async_client, type(self).__name__)
        question = Noul(instructions=DEFAULT_RELEVANCE_NOUL) if question is None else question
        if not isinstance(question, (Noul, Score)):
            raise ValueError(f"question: a Noul or a Score, got {type(question).__name__}")
        self._question = question

    @field_validator("threshold")
    @classmethod
    def _threshold_in_unit_interval(cls, value: float) -> float:
        """The multi selector's rule and message, through pydantic (so coercion and the error type stay)."""
        return unit_interval("threshold", value)

    @classmethod
    def class_name(cls) -> str:
        return "JevRelevanceFilter"

    @classmethod
    def from_defaults(cls, client: Any = None, *, llm: Any = None, async_client: Any = None, model: str | None = None,
                      question: Noul | Score | None = None, threshold: float = 0.5, **client_kwargs: Any) -> JevRelevanceFilter:
        """From an engine client, an OpenAI-compatible client (with ``model=``), or a LlamaIndex ``llm``."""
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, question=question, threshold=threshold)

    def _states(self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None) -> list[dict[str, str]]:
        """One state per node: the query and the node's text (the query is required)."""
        query = _required(query_bundle)
        return [{"question": query.query_str, "passage": n.node.get_content(metadata_mode=MetadataMode.LLM)}
                for n in nodes]

    def _keep(self, nodes: list[NodeWithScore], resps: list[SystemOneResponse]) -> list[NodeWithScore]:
        """The nodes whose relevance reaches the threshold, in order, scored by it."""
        kept = []
        for node, resp in zip(nodes, resps):
            p = relevance(resp.answers[QUESTION_ID])
            if p >= self.threshold:
                kept.append(NodeWithScore(node=node.node, score=p))
        return kept

    # -- the thin sync and async shells: judge every node concurrently, then keep ----------------

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        states = self._states(nodes, query_bundle)
        return self._keep(nodes, ask_each(self._pair, states, {QUESTION_ID: self._question}))

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        states = self._states(nodes, query_bundle)
        return self._keep(nodes, await aask_each(self._pair, states, {QUESTION_ID: self._question}))


def _required(query_bundle: QueryBundle | None) -> QueryBundle:
    if query_bundle is None:
        raise ValueError("JevRelevanceFilter judges nodes against the query: pass query_bundle= or query_str=")
    return query_bundle


def ask_each(pair: ClientPair, states: list[Any], questions: dict[str, Any],
             limit: int | None = None) -> list[SystemOneResponse]:
    """The same questions on each state, on up to ``limit`` (else the client's ``max_concurrency``) threads."""
    if not states:
        return []
    workers = min(len(states), limit or pair.max_concurrency)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jev-filter") as pool:
        return list(pool.map(lambda state: pair.ask(state, questions), states))


async def aask_each(pair: ClientPair, states: list[Any], questions: dict[str, Any],
                    limit: int | None = None) -> list[SystemOneResponse]:
    """The same questions on each state as concurrent tasks, up to ``limit`` (else ``max_concurrency``) at once."""
    sem = asyncio.Semaphore(limit or pair.max_concurrency)

    async def one(state: Any) -> SystemOneResponse:
        async with sem:
            return await pair.aask(state, questions)

    return list(await asyncio.gather(*(one(s) for s in states)))
