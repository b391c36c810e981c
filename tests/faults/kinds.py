"""The faults themselves: each a function of the request it answers, in the surface's own words."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

from tests.helpers.replies import error_reply

from . import replies as r
from .server import Fault, Hang, Reply, Request, Reset, json_reply

REFUSAL = "I'm sorry, but I can't help with that."
CUT = '{"probabilities": {"bill'
THOUGHT = "Let me think about which team handles a double charge..."


def refusal(req: Request) -> Reply:
    if req.surface == "responses":
        return json_reply(r.responses([{"type": "refusal", "refusal": REFUSAL}]))
    if req.surface == "messages":
        return json_reply(r.messages([r.text_block(REFUSAL)], stop="refusal"))
    return json_reply(r.chat(None, None, "stop", refusal=REFUSAL))


def content_filter(req: Request) -> Reply:
    if req.surface == "responses":
        return json_reply(r.responses([r.output_text("")], status="incomplete", reason="content_filter"))
    return json_reply(r.chat("", None, "content_filter"))


def truncated(req: Request) -> Reply:
    if req.surface == "responses":
        return json_reply(r.responses([r.output_text(CUT)], status="incomplete", reason="max_output_tokens"))
    if req.surface == "messages":
        return json_reply(r.messages([r.text_block(CUT)], stop="max_tokens"))
    return json_reply(r.chat(CUT, None, "length"))


def reasoning_only(req: Request) -> Reply:
    if req.surface == "responses":
        thought = {"type": "reasoning", "id": "rs_fault", "summary": [{"type": "summary_text", "text": THOUGHT}]}
        return json_reply(r.responses([], before=[thought]))
    if req.surface == "messages":
        return json_reply(r.messages([{"type": "thinking", "thinking": THOUGHT, "signature": "sig"}]))
    return json_reply(r.chat("", None, "stop", reasoning_content=THOUGHT))


def logprobs_null(req: Request) -> Reply:
    symbol = r.asked_symbols(req)[0]
    if req.surface == "responses":
        part = {**r.output_text(symbol), "logprobs": None}
        return json_reply(r.responses([part]))
    return json_reply(r.chat(symbol, None, "length"))


def logprobs_empty(req: Request) -> Reply:
    symbol = r.asked_symbols(req)[0]
    if req.surface == "responses":
        return json_reply(r.responses([r.output_text(symbol, [])]))
    return json_reply(r.chat(symbol, {"content": []}, "length"))


def with_values(*values: float) -> Fault:
    """The labels' window with these logprobs, in label order (NaN, -inf, -9999 as sent)."""

    def fault(req: Request) -> Reply:
        symbols = r.asked_symbols(req)
        return json_reply(r.tokens_reply(req, r.window(list(zip(symbols, values)) + [("The", -9.0)])))

    return fault


def no_label(req: Request) -> Reply:
    return json_reply(r.tokens_reply(req, r.window([("Sure", -0.2), (" I", -1.9), ("The", -2.6)])))


def error(status: int, message: str, *, param: str | None = None, code: str | None = None,
          headers: dict[str, str] | None = None) -> Fault:
    """An HTTP error with an OpenAI-style body (Anthropic's ``{type: error, error: {...}}`` on Messages)."""
    return lambda req: error_reply(req, status, message, param=param, code=code, headers=headers)


def refuse_field(req: Request) -> Reply:
    """A 400 naming the field a strict server does not know: chat_template_kwargs, or output_config."""
    name = "output_config" if req.surface == "messages" else "chat_template_kwargs"
    return error(400, f"Unrecognized request argument supplied: {name}", param=name)(req)


def reset(_: Request) -> Reset:
    return Reset()


def hang(seconds: float) -> Fault:
    return lambda _req: Hang(seconds)


def huge(req: Request) -> Reply:
    """A good reply padded to 10 MB with a field the engine does not read."""
    body = json.loads(r.good(req).body)
    body["padding"] = "x" * 10_000_000
    return json_reply(body)


def raw(body: bytes, content_type: str = "application/json") -> Fault:
    return lambda _req: Reply(200, body, {"content-type": content_type})


def wrong_types(variant: int) -> Fault:
    """Right JSON, wrong value types: the top-level list a string, or a nested field a number."""

    def fault(req: Request) -> Reply:
        if req.surface == "responses":
            body = {"output": "x"} if variant == 0 else r.responses([r.output_text("billing", 5)])
        elif req.surface == "messages":
            body = {"content": "x", "stop_reason": "end_turn"} if variant == 0 else r.messages([r.text_block(5)])
        else:
            body = {"choices": "x"} if variant == 0 else r.chat("billing", {"content": 5}, "length")
        return json_reply(body)

    return fault


MALFORMED: dict[str, Fault] = {
    "not_json": raw(b"this is not json"),
    "empty_body": raw(b""),
    "html": raw(b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html"),
    "not_utf8": raw(b'{"choices": "\xff\xfe\xfa"}'),
    "wrong_type_list": wrong_types(0),
    "wrong_type_field": wrong_types(1),
}

NAN, NEG_INF = math.nan, -math.inf
Builder = Callable[[Request], Reply]
