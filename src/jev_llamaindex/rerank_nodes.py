"""The nodes JevRerank reads and returns: what the model reads of a node, each node's reading, and the copies it
returns (sorted by the blended key, the readings in metadata the LLM and the embedder never see)."""

from __future__ import annotations

from typing import Any

from llama_index.core.schema import MetadataMode, NodeWithScore

from jev_shared import ChoiceAnswer, SystemOneResponse, answer_confidence

from .postprocessor import relevance
from .rerank_modes import batches, blend, list_relevances

#: What JevRerank writes into each returned node's metadata (kept out of the LLM's and the embedder's text).
RERANK_METADATA_KEYS = ("retrieval_score", "retrieval_rank", "jev_relevance", "jev_confidence",
                        "jev_low_confidence", "jev_rerank_error")


def node_state(n: NodeWithScore) -> str:
    """What the model reads of a node: its text with the metadata meant for an LLM (ours excluded)."""
    return n.node.get_content(metadata_mode=MetadataMode.LLM)


def readings(mode: str, nodes: list[NodeWithScore], resps: list[SystemOneResponse], list_size: int,
             question_id: str) -> list[tuple[float, float]]:
    """(relevance, confidence) per node: its own answer, or its share of its batch's list answer."""
    if mode != "list":
        return [(relevance(r.answers[question_id]), answer_confidence(r.answers[question_id])) for r in resps]
    out: list[tuple[float, float]] = []
    for b, resp in zip(batches(len(nodes), list_size), resps):
        answer = resp.answers[question_id]
        assert isinstance(answer, ChoiceAnswer)
        out += [(p, answer.confidence) for p in list_relevances(answer, len(b))]
    return out


def ranked(nodes: list[NodeWithScore], read: list[tuple[float, float]], top_n: int, weight: float,
           min_confidence: float | None) -> list[NodeWithScore]:
    """Copies of the nodes, highest sort key first (ties keep retrieval order), cut at ``top_n``."""
    judged = []
    for rank, (n, (p, conf)) in enumerate(zip(nodes, read)):
        extra: dict[str, Any] = {"jev_relevance": p, "jev_confidence": conf}
        if min_confidence is not None:
            extra["jev_low_confidence"] = conf < min_confidence
        judged.append(copy_node(n, rank, blend(p, rank, len(nodes), weight), extra))
    judged.sort(key=lambda n: -(n.score or 0.0))
    return judged[:top_n]


def in_retrieval_order(nodes: list[NodeWithScore], error: str) -> list[NodeWithScore]:
    """Copies of the nodes as retrieved, each saying why they were not reranked."""
    return [copy_node(n, rank, n.score, {"jev_rerank_error": error}) for rank, n in enumerate(nodes)]


def copy_node(n: NodeWithScore, rank: int, score: float | None, extra: dict[str, Any]) -> NodeWithScore:
    """A copy of the node (the docstore's stays as it was) with the retrieval facts and ``extra`` in metadata."""
    node = n.node.model_copy()
    node.metadata = {**n.node.metadata, "retrieval_score": n.score, "retrieval_rank": rank, **extra}
    hidden = [k for k in RERANK_METADATA_KEYS if k not in n.node.excluded_llm_metadata_keys]
    node.excluded_llm_metadata_keys = [*n.node.excluded_llm_metadata_keys, *hidden]
    node.excluded_embed_metadata_keys = [*n.node.excluded_embed_metadata_keys,
                                         *(k for k in RERANK_METADATA_KEYS if k not in n.node.excluded_embed_metadata_keys)]
    return NodeWithScore(node=node, score=score)


__all__ = ["RERANK_METADATA_KEYS", "copy_node", "in_retrieval_order", "node_state", "ranked", "readings"]
