"""Model defaults: what the engine knows about a model, by its name, wherever the client was built.

``debias="auto"`` and ``calibrator="auto"`` resolve here, so the library, ``jev decide`` and ``jev
serve`` give the same answer on the same model (a client's origin says nothing about the model).
A name is recognised in the spellings servers report: a hub path, a GGUF file, ollama's tag.
"""

from __future__ import annotations

import re

#: Models on which debias="auto" was measured to win, zero-shot and with examples (docs/decisions.md).
DEBIAS_MEASURED = frozenset({"qwen2.5-coder-0.5b"})

#: What a server or a file adds to a model's name: the tuning, the format, the quantisation.
_SUFFIX = re.compile(r"-(instruct|chat|it|gguf|q\d[a-z0-9]*(-[a-z0-9]+)*|bf16|fp16|f16)$")


def canonical(model: str) -> str:
    """``Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF``, ``qwen2.5-coder:0.5b`` and ``qwen2.5-coder-0.5b-instruct-q8_0.gguf``
    all name ``qwen2.5-coder-0.5b``."""
    name = model.strip().lower().rsplit("/", 1)[-1].removesuffix(".gguf").replace(":", "-").replace("_", "-")
    while (shorter := _SUFFIX.sub("", name)) != name and shorter:
        name = shorter
    return name


def debias_by_default(model: str) -> bool:
    """What debias="auto" means for ``model``: on where it was measured to win, off elsewhere."""
    return canonical(model) in DEBIAS_MEASURED
