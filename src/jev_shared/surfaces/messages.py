"""The Messages API (Anthropic's, and compatible servers): the system prompt apart, a required output budget, the
schema in ``output_config``; no token distribution, so under api="auto" a token readout moves to Chat Completions.
"""

from __future__ import annotations

from typing import Any

from ..calls import Call
from .chat import CHAT
from .common import int_or_none, json_copy
from .wire import Parsed, Surface

MESSAGES = "messages"
MESSAGES_PATH = ("messages", "create")
#: The output budget a Messages call must name (the API requires one); generous on purpose.
MESSAGES_MAX_TOKENS = 4096


def fold_bounds(schema: Any) -> Any:
    """Anthropic's structured outputs reject numerical constraints: fold each into the description."""
    if isinstance(schema, list):
        return [fold_bounds(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out, notes = {}, []
    for key, value in schema.items():
        if key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            notes.append(f"{key} {value}")
        else:
            out[key] = fold_bounds(value)
    if notes:
        out["description"] = "; ".join(filter(None, [out.get("description"), ", ".join(notes)]))
    return out


def messages_call(model: str, messages: list[dict[str, Any]], fields: dict[str, Any], extra: dict[str, Any],
                  user_extra: dict[str, Any] | None = None) -> Call:
    """Messages kwargs: the system prompt apart, a required max_tokens, the schema in output_config."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    kwargs: dict[str, Any] = {"model": model, "system": system,
                              "messages": [json_copy(m) for m in messages if m["role"] != "system"],
                              "max_tokens": fields.get("max_tokens", MESSAGES_MAX_TOKENS)}
    body = dict(extra)
    if "temperature" in fields:  # in the body: newer Anthropic SDKs no longer take it as a keyword
        body["temperature"] = fields["temperature"]
    fmt = (fields.get("response_format") or {}).get("json_schema")
    if fmt:
        # in the body, not as an SDK keyword: older Anthropic SDKs have no such parameter
        body["output_config"] = {"format": {"type": "json_schema", "schema": fold_bounds(fmt["schema"])}}
    body.update(user_extra or {})
    if body:
        kwargs["extra_body"] = body
    return Call(MESSAGES, kwargs, MESSAGES_PATH)


MESSAGES_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "pause_turn": "stop",
                   "max_tokens": "length", "refusal": "refusal", "model_context_window_exceeded": "context"}


def parse_messages(body: dict[str, Any]) -> Parsed:
    usage = body.get("usage") or {}
    text, thinking = [], []
    for block in body.get("content") or []:
        if block.get("type") == "text":
            text.append(block.get("text") or "")
        elif block.get("type") == "thinking":
            thinking.append(block.get("thinking") or "")
    stop = body.get("stop_reason")
    finish = MESSAGES_FINISH.get(stop, f"unknown:{stop!r}") if isinstance(stop, str) else f"unknown:{stop!r}"
    if stop is None:
        finish = "stop"
    content = "".join(text) if text else None
    return Parsed(
        content=content,
        logprobs=None,
        finish=finish,
        reasoning="\n".join(thinking) or None,
        refusal=(content or "the model refused (stop_reason='refusal')") if finish == "refusal" else None,
        input_tokens=int_or_none(usage.get("input_tokens")),
        output_tokens=int_or_none(usage.get("output_tokens")),
    )


MESSAGES_SURFACE = Surface(MESSAGES, MESSAGES_PATH, "/v1/messages", messages_call, parse_messages, logprobs=False,
                           fallback=CHAT, title="the Messages API")
