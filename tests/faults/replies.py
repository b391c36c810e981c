"""Provider-shaped replies for the fault server, per surface, read off the request they answer.

A good reply is what a sensible model would send: for a token method one label token whose
``top_logprobs`` window holds the labels the prompt asks for (first label most likely); for a
JSON method an object of the shape the request's schema asks for. The builders also make the
faulty shapes (a refusal, a cut-off answer, a bare window) in each surface's own words, from the
shared builders of :mod:`tests.helpers.replies`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.helpers.replies import (  # noqa: F401 - the builders the fault kinds use, under one name
    chat,
    messages,
    output_text,
    responses,
    text_block,
    text_reply,
    tokens_reply,
    window,
)
from tests.helpers.wire import Reply, Request, json_reply

_ASKED = re.compile(r"Answer with exactly one (?:letter|option name|digit|word) \(([^)]*)\)")
_PROMPT_SCHEMA = "matching this schema, and nothing else:\n"
FILLER = ("The", " I", "Sure")


def prompt_text(req: Request) -> str:
    """Every text the request sends the model, joined (system prompt first)."""
    body = req.body or {}
    parts = [body.get("system")] if isinstance(body.get("system"), str) else []
    for m in body.get("messages") or body.get("input") or []:
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            parts.append(m["content"])
    return "\n".join(parts)


def wants_tokens(req: Request) -> bool:
    body = req.body or {}
    return bool(body.get("logprobs")) or any("logprobs" in str(i) for i in body.get("include") or [])


def asked_symbols(req: Request) -> list[str]:
    """The labels the prompt asks for (names, digits, yes/no or letters)."""
    found = _ASKED.search(prompt_text(req))
    return [s.strip() for s in found.group(1).split(",")] if found else ["A", "B"]


def sent_schema(req: Request) -> dict[str, Any] | None:
    """The JSON schema the request carries: the structured-output field, else the prompt's copy."""
    body = req.body or {}
    for holder in ((body.get("response_format") or {}).get("json_schema"), (body.get("text") or {}).get("format"),
                   (body.get("output_config") or {}).get("format")):
        if isinstance(holder, dict) and isinstance(holder.get("schema"), dict):
            return holder["schema"]
    text = prompt_text(req)
    if _PROMPT_SCHEMA in text:
        try:
            value, _ = json.JSONDecoder().raw_decode(text.split(_PROMPT_SCHEMA, 1)[1])
        except ValueError:
            return None
        return value if isinstance(value, dict) else None
    return None


def answer_for(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A right-shaped answer for structured / discrete / ratings schemas; None for a schema it cannot read."""
    props = (schema or {}).get("properties")
    if not isinstance(props, dict) or not props:
        return None
    if "probabilities" in props:
        keys = list(props["probabilities"].get("properties") or {})
        rest = 0.3 / max(1, len(keys) - 1)
        return {"probabilities": {k: 0.7 if i == 0 else rest for i, k in enumerate(keys)}}
    if list(props) == ["noul"]:
        return {"noul": 0.8 if props["noul"].get("type") == "number" else True}
    if list(props) in (["choice"], ["score"]):
        name = next(iter(props))
        return {name: props[name]["enum"][0]}
    return {k: 8 if i == 0 else 2 for i, k in enumerate(props)}


def label_window(symbols: list[str]) -> list[dict[str, Any]]:
    pairs = [(s, -0.1 - 2.0 * i) for i, s in enumerate(symbols)] + [(f, -9.0 - i) for i, f in enumerate(FILLER)]
    return window(pairs)


def good(req: Request) -> Reply:
    """What a sensible model answers to this request."""
    if wants_tokens(req):
        return json_reply(tokens_reply(req, label_window(asked_symbols(req))))
    answer = answer_for(sent_schema(req))
    return json_reply(text_reply(req, json.dumps(answer) if answer is not None else "I am not sure what to send."))
