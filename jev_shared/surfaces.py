"""Surfaces: the wire request for one API, and the reply read back into one common shape.

Chat Completions is the surface every OpenAI-compatible server speaks. Each surface reports
refusals, filters and truncation in its own words; they are mapped here to typed errors, so no
cut-off or refused reply is ever parsed as an answer.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from .errors import IncompleteAnswerError, ModelRefusalError
from .transport import Call

CHAT = "chat_completions"


@dataclass
class Parsed:
    """What every surface's reply comes down to."""

    content: str | None
    logprobs: Any
    finish: str | None
    reasoning: str | None = None
    refusal: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


def chat_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
              user_extra: dict[str, Any] | None = None) -> Call:
    """Chat Completions kwargs; non-standard fields ride in extra_body (the caller's merged last)."""
    kwargs: dict[str, Any] = {"model": model, "messages": copy.deepcopy(messages), **fields}
    body = {**extra, **(user_extra or {})}
    if body:
        kwargs["extra_body"] = body
    return Call(CHAT, kwargs)


def parse_chat(body: dict[str, Any]) -> Parsed:
    choices = body.get("choices") or []
    usage = body.get("usage") or {}
    tokens = (_int(usage.get("prompt_tokens", usage.get("input_tokens"))),
              _int(usage.get("completion_tokens", usage.get("output_tokens"))))
    if not choices:
        return Parsed(None, None, None, None, None, *tokens)
    choice = choices[0] or {}
    message = choice.get("message") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return Parsed(
        content=message.get("content"),
        logprobs=choice.get("logprobs"),
        finish=choice.get("finish_reason"),
        reasoning=reasoning if isinstance(reasoning, str) else None,
        refusal=message.get("refusal"),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def check_refusal(p: Parsed) -> None:
    """A refusal or a content filter is the model declining: never parsed, never retried."""
    if p.refusal:
        raise ModelRefusalError(f"the model refused: {p.refusal}", refusal=p.refusal)
    if p.finish == "content_filter":
        raise ModelRefusalError(
            "the provider filtered the content (finish_reason='content_filter')", refusal=p.content or None
        )


def truncation_error(surface: str = CHAT) -> IncompleteAnswerError:
    field = "max_output_tokens" if surface == "responses" else "max_tokens"
    return IncompleteAnswerError(
        f"the provider ran out of output tokens before the answer was complete; raise {field}", field=field
    )


__all__ = ["Parsed", "chat_call", "parse_chat", "check_refusal", "truncation_error", "CHAT"]
