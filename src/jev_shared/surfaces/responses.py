"""OpenAI's Responses API: logprobs through ``include``, the schema through ``text.format``; under api="auto" a
route that is missing or carries no distribution moves to Chat Completions.
"""

from __future__ import annotations

from typing import Any

from ..calls import Call
from .chat import CHAT
from .common import int_or_none, json_copy
from .wire import Parsed, Surface

RESPONSES = "responses"
RESPONSES_PATH = ("responses", "create")
#: OpenAI's Responses API refuses max_output_tokens below 16.
RESPONSES_MIN_OUTPUT = 16
LOGPROBS_INCLUDE = "message.output_text.logprobs"


def responses_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
                   user_extra: dict[str, Any] | None = None) -> Call:
    """Responses kwargs: logprobs through ``include``, the schema through ``text.format``."""
    # "type": "message" on each item: optional for OpenAI, required by llama.cpp's Responses route
    kwargs: dict[str, Any] = {"model": model, "input": [{"type": "message", **m} for m in json_copy(messages)]}
    for name, value in fields.items():
        if name == "logprobs":
            if value:
                kwargs["include"] = [LOGPROBS_INCLUDE]
        elif name == "max_tokens":
            kwargs["max_output_tokens"] = max(RESPONSES_MIN_OUTPUT, value)
        elif name == "response_format":
            fmt = value.get("json_schema")
            kwargs["text"] = {"format": {"type": "json_schema", **fmt} if fmt else {"type": value["type"]}}
        elif name == "reasoning_effort":
            kwargs["reasoning"] = {"effort": value}
        else:
            kwargs[name] = value
    body = {**extra, **(user_extra or {})}
    if body:
        kwargs["extra_body"] = body
    return Call(RESPONSES, kwargs, RESPONSES_PATH)


def parse_responses(body: dict[str, Any]) -> Parsed:
    usage = body.get("usage") or {}
    text: list[str] = []
    logprobs: list[Any] = []
    reasoning: list[str] = []
    refusal: str | None = None
    for item in body.get("output") or []:
        if item.get("type") == "reasoning":
            for part in (item.get("summary") or []) + (item.get("content") or []):
                if isinstance(part, dict) and part.get("text"):
                    reasoning.append(part["text"])
        if item.get("type") != "message":
            continue
        for part in item.get("content") or []:
            if part.get("type") == "output_text":
                text.append(part.get("text") or "")
                logprobs += part.get("logprobs") or []
            elif part.get("type") == "refusal":
                refusal = part.get("refusal") or "refused"
    status = body.get("status")
    reason = (body.get("incomplete_details") or {}).get("reason")
    if status == "incomplete":
        finish = {"max_output_tokens": "length", "max_tokens": "length", "content_filter": "content_filter"}.get(
            str(reason), f"incomplete:{reason}")
    else:
        finish = "stop" if status in (None, "completed") else str(status)
    return Parsed(
        content="".join(text) if text else None,
        logprobs={"content": logprobs},
        finish=finish,
        reasoning="\n".join(reasoning) or None,
        refusal=refusal,
        input_tokens=int_or_none(usage.get("input_tokens")),
        output_tokens=int_or_none(usage.get("output_tokens")),
    )


RESPONSES_SURFACE = Surface(RESPONSES, RESPONSES_PATH, "/responses", responses_call, parse_responses, fallback=CHAT,
                            budget_field="max_output_tokens", logprobs_field="include")
