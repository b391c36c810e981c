"""What JevRerank asks, per mode, and how it blends the answer with the retrieval order.

``mode="list"`` asks one ``Choice`` per batch of nodes: the nodes are the options (their text the
descriptions, letters the labels), the query the state, and a node's relevance is the probability
that it is the passage that answers. Measured on Qwen2.5-Coder-0.5B (``python -m bench rerank_tune``), that
comparison separates nodes where a per-node judgement (a ``Score`` or ``Noul`` on each node alone)
reads nearly the same for all of them; and each node's text is sent once, not once per node with
the engine's instructions around it.

``retrieval_weight`` blends in the retrieval order as a prior, ``(1 − w)·relevance + w·prior``: a
first stage is often right, and a small model's reading should move a node only where it is clear.
The prior is the rank (``1 − rank/(n − 1)``), not the retrieval score, so that it means the same
for BM25, cosine similarity or a retriever that gives no score.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from jev_shared import Choice, ChoiceAnswer, ClientPair, SystemOneResponse

#: Most nodes in one list question: the letters A..Z, one token each.
MAX_LIST_SIZE = 26


def batches(n: int, size: int) -> list[range]:
    """Node indices in consecutive batches of at most ``size``; a last batch of one joins the one before."""
    out = [range(i, min(i + size, n)) for i in range(0, n, size)]
    if len(out) > 1 and len(out[-1]) == 1 and len(out[-2]) < MAX_LIST_SIZE:
        out[-2:] = [range(out[-2].start, n)]
    return out


def option_key(i: int) -> str:
    return f"passage {i + 1}"


def list_question(instructions: str, texts: list[str]) -> Choice:
    """One question over ``texts`` (one line each: a line break would read as the next option)."""
    return Choice(instructions=instructions, criteria={option_key(i): " ".join(t.split()) or "(empty)"
                                                       for i, t in enumerate(texts)})


def ask_lists(pair: ClientPair, query_str: str, questions: list[dict[str, Choice]],
              limit: int | None = None) -> list[SystemOneResponse]:
    """Each batch's list question about the query (its state), on up to ``limit`` (else the client's) threads."""
    workers = min(len(questions), limit or pair.max_concurrency) or 1
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="jev-rerank") as pool:
        return list(pool.map(lambda q: pair.ask(query_str, q, labels="letters"), questions))


async def aask_lists(pair: ClientPair, query_str: str, questions: list[dict[str, Choice]],
                     limit: int | None = None) -> list[SystemOneResponse]:
    """:func:`ask_lists` as concurrent tasks, up to ``limit`` (else the client's ``max_concurrency``) at once."""
    sem = asyncio.Semaphore(limit or pair.max_concurrency)

    async def one(q: dict[str, Choice]) -> SystemOneResponse:
        async with sem:
            return await pair.aask(query_str, q, labels="letters")

    return list(await asyncio.gather(*(one(q) for q in questions)))


def list_relevances(answer: ChoiceAnswer, n: int) -> list[float]:
    """Each option's probability, scaled so that the batch's likeliest node is 1.

    Scaled, a batch's relevances sit on the prior's scale (its first node is 1 too) whatever the
    batch size, and two batches' best nodes compare as equals rather than by how many rivals each had.
    """
    probs = [answer.probabilities.get(option_key(i), 0.0) for i in range(n)]
    top = max(probs, default=0.0)
    return [p / top if top > 0 else 0.0 for p in probs]


def rank_prior(rank: int, n: int) -> float:
    """1 for the first retrieved node down to 0 for the last."""
    return 1.0 - rank / (n - 1) if n > 1 else 1.0


def blend(relevance: float, rank: int, n: int, weight: float) -> float:
    """The sort key: the model's relevance, pulled toward the retrieval order by ``weight``."""
    if weight == 0.0:
        return relevance
    return (1.0 - weight) * relevance + weight * rank_prior(rank, n)
