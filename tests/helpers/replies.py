"""Provider-shaped bodies, per surface: replies with a logprob window, JSON answers, documented errors.

Each builder writes one surface's own shape (Chat Completions, Responses, Messages), so a test
states only what differs: the window, the text, the finish reason. The handler factories at the
end turn them into functions of the request (see :mod:`tests.helpers.wire`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from .wire import Handler, Reply, Request, json_reply

Pairs = Sequence[tuple[str, float | None]]
#: A window: (token, logprob) pairs in the order sent, or a mapping token → logprob (sent best first).
Window = Pairs | Mapping[str, float]


def pairs_of(window: Window) -> list[tuple[str, float | None]]:
    """The window as (token, logprob) pairs; a mapping is ranked best first (the sampled token leads)."""
    if isinstance(window, Mapping):
        return sorted(window.items(), key=lambda kv: -kv[1])
    return list(window)


def entries(pairs: Pairs, *, with_bytes: bool = True) -> list[dict[str, Any]]:
    """``top_logprobs`` entries, with each token's UTF-8 bytes as OpenAI sends them."""
    return [{"token": t, "logprob": lp, **({"bytes": list(t.encode())} if with_bytes else {})} for t, lp in pairs]


def window(pairs: Window, sampled: tuple[str, float | None] | None = None, *,
           with_bytes: bool = True) -> list[dict[str, Any]]:
    """One answer token (``sampled``, else the first pair) carrying its ``top_logprobs`` window."""
    pairs = pairs_of(pairs)
    token, lp = sampled or pairs[0]
    head = entries([(token, lp)], with_bytes=with_bytes)[0]
    return [{**head, "top_logprobs": entries(pairs, with_bytes=with_bytes)}]


def chat_logprobs(pairs: Window, sampled: tuple[str, float | None] | None = None) -> dict[str, Any]:
    """A Chat Completions ``logprobs`` object: one answer token and its window (no bytes)."""
    return {"content": window(pairs, sampled, with_bytes=False)}


# --- whole replies, one per surface ----------------------------------------------------------------


def chat(content: str | None, logprobs: Any = None, finish: str = "stop", *, usage: tuple[int, int] = (90, 1),
         **message: Any) -> dict[str, Any]:
    """A Chat Completions reply; ``message`` adds fields to the message (``refusal``, ``reasoning_content``)."""
    return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": "test-model",
            "choices": [{"index": 0, "finish_reason": finish, "logprobs": logprobs,
                         "message": {"role": "assistant", "content": content, "refusal": None, **message}}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def chat_tokens(pairs: Window, finish: str = "length", **kw: Any) -> dict[str, Any]:
    """A one-token Chat Completions reply: the window's first token, cut at ``max_tokens: 1``."""
    entries_ = window(pairs)
    return chat(entries_[0]["token"], {"content": entries_}, finish, **kw)


def chat_json(answer: Any, **kw: Any) -> dict[str, Any]:
    """A finished Chat Completions reply whose text is ``answer`` as JSON."""
    return chat(json.dumps(answer), None, "stop", **kw)


def responses(parts: list[dict[str, Any]], status: str = "completed", reason: str | None = None,
              before: list[dict[str, Any]] | None = None, *, usage: tuple[int, int] = (90, 1)) -> dict[str, Any]:
    """A Responses reply: ``parts`` in one assistant message, after the items ``before`` (reasoning)."""
    output = list(before or [])
    if parts:
        output.append({"type": "message", "id": "msg_test", "status": status, "role": "assistant", "content": parts})
    return {"id": "resp_test", "object": "response", "created_at": 0, "status": status, "model": "test-model",
            "output": output, "incomplete_details": {"reason": reason} if reason else None,
            "parallel_tool_calls": False, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)}}


def output_text(text: str, logprobs: Any = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": [] if logprobs is None else logprobs}


def responses_tokens(pairs: Window) -> dict[str, Any]:
    """A one-token Responses reply carrying the window (``include: message.output_text.logprobs``)."""
    entries_ = window(pairs)
    return responses([output_text(entries_[0]["token"], entries_)])


def messages(content: list[dict[str, Any]], stop: Any = "end_turn") -> dict[str, Any]:
    """An Anthropic Messages reply."""
    return {"id": "msg_test", "type": "message", "role": "assistant", "model": "test-model", "content": content,
            "stop_reason": stop, "stop_sequence": None, "usage": {"input_tokens": 90, "output_tokens": 12}}


def text_block(text: Any) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tokens_reply(req: Request, entries_: Any, *, finish: str = "length",
                 usage: tuple[int, int] = (90, 1)) -> dict[str, Any]:
    """A one-token reply on the request's surface carrying ``entries_`` as its logprobs content."""
    text = str(entries_[0]["token"]) if isinstance(entries_, list) and entries_ else ""
    if req.surface == "responses":
        return responses([output_text(text, entries_)], usage=usage)
    return chat(text, {"content": entries_} if entries_ is not None else None, finish, usage=usage)


def text_reply(req: Request, text: str) -> dict[str, Any]:
    """A finished text answer on the request's surface."""
    if req.surface == "responses":
        return responses([output_text(text)])
    if req.surface == "messages":
        return messages([text_block(text)])
    return chat(text)


# --- documented error bodies ----------------------------------------------------------------------


def error(message: str, *, type: str = "invalid_request_error", param: str | None = None,  # noqa: A002
          code: str | None = None) -> dict[str, Any]:
    """OpenAI's error body (vLLM, llama.cpp and the proxies send the same four fields)."""
    return {"error": {"message": message, "type": type, "param": param, "code": code}}


def anthropic_error(message: str, type: str = "invalid_request_error") -> dict[str, Any]:  # noqa: A002
    """Anthropic's error body: ``{type: error, error: {type, message}}``."""
    return {"type": "error", "error": {"type": type, "message": message}}


def error_reply(req: Request, status: int, message: str, *, param: str | None = None, code: str | None = None,
                headers: dict[str, str] | None = None) -> Reply:
    """An HTTP error in the request's surface's own words (Anthropic's body on Messages)."""
    body = anthropic_error(message) if req.surface == "messages" else error(message, param=param, code=code)
    return json_reply(body, status, headers)


# --- handlers: functions of the request -----------------------------------------------------------


def in_turn(*answers: Any) -> Handler:
    """Each request gets the next answer, the last repeated; an answer is a body, a Reply or a handler."""
    queue = list(answers)
    lock = threading.Lock()  # requests on threads take their turns one at a time

    def handle(req: Request) -> Any:
        with lock:
            answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return answer(req) if callable(answer) else answer

    return handle


def windows(*windows_: Window, usage: tuple[int, int] = (10, 1)) -> Handler:
    """Each request gets a one-token reply carrying the next window (the last repeated), on its surface."""
    return in_turn(*(lambda req, w=w: tokens_reply(req, window(w), usage=usage) for w in windows_))


def fails(status: int = 400, message: str = "the provider is down", **kw: Any) -> Handler:
    """Every request gets an HTTP error (a 400 is never retried)."""
    return lambda req: error_reply(req, status, message, **kw)
