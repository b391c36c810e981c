"""Small builders for provider-shaped data, shared by the unit tests."""

from __future__ import annotations

from typing import Any


def window(pairs: list[tuple[str, float | None]], sampled: tuple[str, float | None] | None = None) -> dict[str, Any]:
    """A Chat Completions ``logprobs`` object: one answer token and its top_logprobs window."""
    token, lp = sampled or pairs[0]
    return {"content": [{"token": token, "logprob": lp, "top_logprobs": [{"token": t, "logprob": v} for t, v in pairs]}]}
