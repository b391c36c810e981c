"""LlamaIndex door: a VectorStoreIndex query engine whose retrieved nodes JevRerank reorders.

    python examples/llamaindex_rerank.py      # needs the llamaindex and local extras

The first stage is a plain vector search over a few support articles (a small deterministic
embedding, so nothing is downloaded); JevRerank then asks which of the retrieved nodes answers the
question (one choice over them, read as a distribution) and keeps the best two (``retrieval_weight``
would blend in the retrieval order). Each kept node shows its relevance, its sort key and the retrieval rank and
score it came with. With no
OPENAI_API_KEY it runs on the embedded local model; set OPENAI_API_KEY (and optionally
OPENAI_BASE_URL, JEV_MODEL) to use your provider (and your own embedding model in real use).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _backend import backend  # noqa: E402
from llama_index.core import Document, VectorStoreIndex  # noqa: E402
from llama_index.llms.openai_like import OpenAILike  # noqa: E402

from jev_llamaindex import JevRerank  # noqa: E402
from jev_llamaindex.hash_embedding import HashEmbedding  # noqa: E402

ARTICLES = [
    "Refunds are issued within 5 working days to the card you paid with.",
    "To change the card you pay with, open Settings > Billing and choose Update card.",
    "If the app crashes on start, update it and clear its cache.",
    "Our office is at 12 Harbour Street, Oslo, open 9:00 to 17:00 on weekdays.",
    "Invoices for every payment are under Settings > Billing > Invoices.",
    "A double charge is reversed by your bank within a week; we refund it at once when you write to us.",
]
QUESTIONS = ["How long does a refund take?", "Where can I download an invoice?"]


def main() -> None:
    with backend() as (client, model, where):
        print(f"Reranking with {where}\n")
        # The reranker's LLM: logprobs on and no max_tokens of its own (its settings would win over
        # the engine's one-token request); a second LLM writes the answers.
        judge = OpenAILike(model=model, api_base=str(client.base_url), api_key=client.api_key, is_chat_model=True,
                           logprobs=True, top_logprobs=20)
        writer = OpenAILike(model=model, api_base=str(client.base_url), api_key=client.api_key,
                            is_chat_model=True, max_tokens=40)
        index = VectorStoreIndex.from_documents([Document(text=t) for t in ARTICLES], embed_model=HashEmbedding())
        rerank = JevRerank.from_defaults(llm=judge, top_n=2)
        engine = index.as_query_engine(llm=writer, similarity_top_k=5, node_postprocessors=[rerank])
        for question in QUESTIONS:
            response = engine.query(question)
            print(f"Q: {question}")
            for n in response.source_nodes:
                meta = n.node.metadata
                print(f"   relevance {meta['jev_relevance']:.2f}, sort key {n.score:.2f} (confidence "
                      f"{meta['jev_confidence']:.2f}; retrieved at rank "
                      f"{meta['retrieval_rank'] + 1}, similarity {meta['retrieval_score']:.2f}): {n.node.get_content()}")
            print(f"A: {str(response).strip()}\n")


if __name__ == "__main__":
    main()
