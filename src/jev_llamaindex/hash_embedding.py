"""A deterministic bag-of-words embedding: retrieval with no model and no network, for examples and tests.

Words are hashed into ``dim`` buckets and the counts scaled to unit length, so texts that share words
are near. Not for real retrieval (use your embedding model); it lets a ``VectorStoreIndex`` run in a
fresh checkout that may download nothing (``examples/llamaindex_rerank.py``, ``tests/llamaindex``).
"""

from __future__ import annotations

import hashlib
import math
import re

from llama_index.core.base.embeddings.base import BaseEmbedding


class HashEmbedding(BaseEmbedding):
    """Hashed bag of words, unit length."""

    dim: int = 64

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dim
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            v[int(hashlib.sha1(word.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)
