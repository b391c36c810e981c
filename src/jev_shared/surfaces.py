"""Surfaces: the three per-question wires (Chat Completions, Responses, Messages), each a :class:`Surface`.

The method stage speaks Chat Completions' field names (``logprobs``, ``top_logprobs``,
``max_tokens``, ``response_format``, ``reasoning_effort``); each surface translates them into its
own and reads its reply into :class:`Parsed`. Each surface reports refusals, filters and truncation
in its own words; :func:`check_refusal` and :func:`check_complete` map them to typed errors, so no cut-off or refused reply is
ever parsed as an answer.
"""

from __future__ import annotations

import copy
from typing import Any

from .calls import Call
from .errors import IncompleteAnswerError, ModelRefusalError
from .exact import as_logprobs
from .wire import Parsed, Surface

CHAT = "chat_completions"
RESPONSES = "responses"
MESSAGES = "messages"
#: The output budget a Messages call must name (the API requires one); generous on purpose.
MESSAGES_MAX_TOKENS = 4096
#: OpenAI's Responses API refuses max_output_tokens below 16.
RESPONSES_MIN_OUTPUT = 16
CHAT_PATH = ("chat", "completions", "create")
RESPONSES_PATH = ("responses", "create")
MESSAGES_PATH = ("messages", "create")
def json_copy(value: Any) -> Any:
    """A copy of JSON-shaped data (its dicts and lists new, its strings and numbers shared): ``copy.deepcopy``'s
    result for a request's messages at half its CPU (a decision's hot path, bench/cpu.py)."""
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return copy.deepcopy(value) if isinstance(value, (tuple, set)) else value


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# --- Chat Completions ------------------------------------------------------------------------------


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
    tokens = (_int(usage.get("prompt_tokens", usage.get("input_tokens"))),
              _int(usage.get("completion_tokens", usage.get("output_tokens"))))
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


# --- Responses -------------------------------------------------------------------------------------

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
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
    )


# --- Messages (Anthropic-compatible) -------------------------------------------------------------


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
        input_tokens=_int(usage.get("input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
    )


#: The wires, each one value (the registry lists them: registry.py). A prefill and a grammar are Chat
#: Completions messages and fields; Responses and Messages move to Chat Completions under api="auto".
CHAT_SURFACE = Surface(CHAT, CHAT_PATH, "/chat/completions", chat_call, parse_chat, prefill=True, grammar=True)
RESPONSES_SURFACE = Surface(RESPONSES, RESPONSES_PATH, "/responses", responses_call, parse_responses, fallback=CHAT,
                            budget_field="max_output_tokens", logprobs_field="include")
MESSAGES_SURFACE = Surface(MESSAGES, MESSAGES_PATH, "/v1/messages", messages_call, parse_messages, logprobs=False,
                           fallback=CHAT, title="the Messages API")


def check_types(p: Parsed) -> None:
    """A parsed reply whose fields have the wrong types raises TypeError (the registry's parse_reply maps it)."""
    _check_types(p)


def _check_types(p: Parsed) -> None:
    for name in ("content", "finish", "refusal"):
        value = getattr(p, name)
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{name} is a {type(value).__name__}, not text")
    if p.logprobs is None:
        return
    if not isinstance(p.logprobs, dict):
        raise TypeError(f"logprobs is a {type(p.logprobs).__name__}, not an object")
    entries = p.logprobs.get("content")
    if entries is None:
        return
    if not isinstance(entries, list):
        raise TypeError(f"logprobs.content is a {type(entries).__name__}, not a list")
    for entry in entries:
        if not isinstance(entry, dict):
            raise TypeError("a logprobs entry is not an object")
        _check_logprob(entry)
        window = entry.get("top_logprobs")
        if window is not None and not isinstance(window, list):
            raise TypeError("top_logprobs is not a list")
        for alt in window or []:
            if type(alt) is dict and type(alt.get("token")) is str and type(alt.get("logprob")) is float:
                continue  # the common case, ~20 times a reply, without a call
            if not isinstance(alt, dict):
                raise TypeError("a top_logprobs entry is not an object")
            _check_logprob(alt)


def _check_logprob(entry: dict[str, Any]) -> None:
    token, lp = entry.get("token"), entry.get("logprob")
    if type(token) is not str and token is not None and not isinstance(token, str):  # the common case first
        raise TypeError(f"token {token!r} is not text")
    if type(lp) is not float and lp is not None and (isinstance(lp, bool) or not isinstance(lp, (int, float))):
        raise TypeError(f"logprob {lp!r} is not a number")


# --- failures every surface shares -----------------------------------------------------------------


def check_refusal(p: Parsed) -> None:
    """A refusal or a content filter is the model declining: never parsed, never retried."""
    if p.refusal:
        raise ModelRefusalError(f"the model refused: {p.refusal}", refusal=p.refusal)
    if p.finish == "content_filter":
        raise ModelRefusalError(
            "the provider filtered the content (finish_reason='content_filter')", refusal=p.content or None
        )


def check_complete(p: Parsed, budget_field: str = "max_tokens") -> None:
    """A cut-off JSON answer is never parsed: say which budget ran out and the field to raise."""
    if p.finish == "length":
        raise truncation_error(budget_field)
    if p.finish == "context":
        raise IncompleteAnswerError(
            "the provider's context window ran out before the answer (stop_reason='model_context_window_exceeded'); "
            "shorten the state and the examples", field="state")
    if p.finish and (p.finish.startswith("unknown:") or p.finish.startswith("incomplete:")):
        raise IncompleteAnswerError(f"the provider stopped for a reason it does not document ({p.finish}); "
                                    "the reply was not read")


def truncation_error(field: str = "max_tokens") -> IncompleteAnswerError:
    """The answer was cut off: ``field`` is the surface's output cap (:attr:`Surface.budget_field`)."""
    return IncompleteAnswerError(
        f"the provider ran out of output tokens before the answer was complete; raise {field}", field=field
    )


def strip_fields(call: Call, refused: set[str]) -> None:
    """Drop fields this server refused earlier (top level and extra_body); downgrade a refused schema."""
    extra = call.kwargs.get("extra_body") or {}
    for name in refused:
        call.kwargs.pop(name, None)
        extra.pop(name, None)
    if "response_format:json_schema" in refused and (call.kwargs.get("response_format") or {}).get("type") == "json_schema":
        call.kwargs["response_format"] = {"type": "json_object"}
    if "extra_body" in call.kwargs and not extra:
        call.kwargs.pop("extra_body")


__all__ = ["Parsed", "check_refusal", "check_complete", "truncation_error", "CHAT", "RESPONSES", "MESSAGES",
           "CHAT_SURFACE", "RESPONSES_SURFACE", "MESSAGES_SURFACE", "chat_call", "parse_chat", "strip_fields"]
