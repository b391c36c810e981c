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

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from jev_shared import Answer, AsyncSystemOneClient, Noul, NoulAnswer, Score, ScoreAnswer, SystemOneClient

from ._clients import Asker, resolve_clients

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

    threshold: float = Field(default=0.5, ge=0.0, le=1.0, description="Relevance a node needs to be kept.")
    _asker: Asker = PrivateAttr()
    _question: Noul | Score = PrivateAttr()

    def __init__(self, client: SystemOneClient | None = None, *, async_client: AsyncSystemOneClient | None = None,
                 question: Noul | Score | None = None, threshold: float = 0.5, **kwargs: Any) -> None:
        super().__init__(threshold=threshold, **kwargs)
        self._asker = Asker(client, async_client, type(self).__name__)
        question = Noul(instructions=DEFAULT_RELEVANCE_NOUL) if question is None else question
        if not isinstance(question, (Noul, Score)):
            raise ValueError(f"question: a Noul or a Score, got {type(question).__name__}")
        self._question = question

    @classmethod
    def class_name(cls) -> str:
        return "JevRelevanceFilter"

    @classmethod
    def from_defaults(cls, client: Any = None, *, llm: Any = None, async_client: Any = None, model: str | None = None,
                      question: Noul | Score | None = None, threshold: float = 0.5, **client_kwargs: Any) -> JevRelevanceFilter:
        """From an engine client, an OpenAI-compatible client (with ``model=``), or a LlamaIndex ``llm``."""
        sync, async_ = resolve_clients(client, async_client=async_client, llm=llm, model=model, **client_kwargs)
        return cls(sync, async_client=async_, question=question, threshold=threshold)

    def _state(self, node: NodeWithScore, query: QueryBundle) -> dict[str, str]:
        return {"question": query.query_str, "passage": node.node.get_content(metadata_mode=MetadataMode.LLM)}

    def _keep(self, nodes: list[NodeWithScore], answers: list[Answer]) -> list[NodeWithScore]:
        kept = []
        for node, answer in zip(nodes, answers):
            p = relevance(answer)
            if p >= self.threshold:
                kept.append(NodeWithScore(node=node.node, score=p))
        return kept

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _required(query_bundle)
        if not nodes:
            return []

        def judge(node: NodeWithScore) -> Answer:
            return self._asker.ask(self._state(node, query), {QUESTION_ID: self._question}).answers[QUESTION_ID]

        client = self._asker.sync
        workers = min(len(nodes), client.max_concurrency if client else 1)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jev-filter") as pool:
            answers = list(pool.map(judge, nodes))
        return self._keep(nodes, answers)

    async def _apostprocess_nodes(self, nodes: list[NodeWithScore],
                                  query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        query = _required(query_bundle)
        client = self._asker.async_ or self._asker.sync
        sem = asyncio.Semaphore(client.max_concurrency if client else 1)

        async def judge(node: NodeWithScore) -> Answer:
            async with sem:
                resp = await self._asker.aask(self._state(node, query), {QUESTION_ID: self._question})
            return resp.answers[QUESTION_ID]

        answers = await asyncio.gather(*(judge(n) for n in nodes))
        return self._keep(nodes, list(answers))


def _required(query_bundle: QueryBundle | None) -> QueryBundle:
    if query_bundle is None:
        raise ValueError("JevRelevanceFilter judges nodes against the query: pass query_bundle= or query_str=")
    return query_bundle

