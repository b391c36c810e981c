"""Chat Completions (OpenAI's, and every server that speaks it): the method stage's own field names, as they are.

Non-standard fields ride in ``extra_body``; a prefill (an assistant message last) and a grammar are this wire's.
"""

from __future__ import annotations

from typing import Any

from ..calls import Call
from ..exact import as_logprobs
from .common import int_or_none, json_copy
from .wire import Parsed, Surface

CHAT = "chat_completions"
CHAT_PATH = ("chat", "completions", "create")


def chat_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
              user_extra: dict[str, Any] | None = None) -> Call:
    """Chat Completions kwargs; non-standard fields ride in extra_body (the caller's merged last)."""
    kwargs: dict[str, Any] = {"model": model, "messages": json_copy(messages), **fields}
    body = {**extra, **(user_extra or {})}
    if body:
        kwargs["extra_body"] = body
    return Call(CHAT, kwargs, CHAT_PATH)


def parse_chat(body: dict[str, Any]) -> Parsed:
    choices = body.get("choices") or []
    usage = body.get("usage") or {}
    tokens = (int_or_none(usage.get("prompt_tokens", usage.get("input_tokens"))),
              int_or_none(usage.get("completion_tokens", usage.get("output_tokens"))))
    if not choices:
        return Parsed(None, None, None, None, None, *tokens)
    choice = choices[0] or {}
    message = choice.get("message") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    return Parsed(
        content=message.get("content"),
        logprobs=as_logprobs(choice.get("logprobs")),
        finish=choice.get("finish_reason"),
        reasoning=reasoning if isinstance(reasoning, str) else None,
        refusal=message.get("refusal"),
        input_tokens=tokens[0],
        output_tokens=tokens[1],
    )


#: A prefill and a grammar are Chat Completions messages and fields (the registry lists it).
CHAT_SURFACE = Surface(CHAT, CHAT_PATH, "/chat/completions", chat_call, parse_chat, prefill=True, grammar=True)
