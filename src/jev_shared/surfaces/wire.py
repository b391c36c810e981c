"""What a surface is: one wire's request builder, reply parser and the facts the engine asks of it.

A :class:`Surface` is data, not a branch in the flows: the flows ask it whether it carries a token
distribution, takes an assistant prefill or a grammar, and where ``api="auto"`` moves when its route is
missing or carries no distribution. Each wire is one module that builds one ``Surface``; the registry
(:mod:`.registry`) lists them, one line each. Every reply comes down to one :class:`Parsed`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..calls import Call

#: ``build(model, messages, fields, extra, user_extra) -> Call``: the method stage's Chat Completions field
#: names (logprobs, top_logprobs, max_tokens, response_format, reasoning_effort) in the wire's own words.
Builder = Callable[[str, list[dict[str, Any]], dict[str, Any], dict[str, Any], "dict[str, Any] | None"], Call]


@dataclass
class Parsed:
    """What every surface's reply comes down to. ``finish`` is one of stop, length, content_filter,
    context, or the surface's own word when it is not one it documents."""

    content: str | None
    logprobs: Any
    finish: str | None
    reasoning: str | None = None
    refusal: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None


Parser = Callable[[dict[str, Any]], Parsed]


@dataclass(frozen=True)
class Surface:
    """One wire. ``path`` is the client method it calls (``("chat", "completions", "create")``); ``route`` the
    HTTP route an SDK client's own ``post`` reaches it by (the lean path, transport.py), None for none."""

    name: str
    path: tuple[str, ...]
    route: str | None = None
    build: Builder | None = None  # None: a whole-call wire with its own builder (hosted.py)
    parse: Parser | None = None
    #: it can carry a token distribution (logprobs); False: token readouts are refused, auto reads JSON
    logprobs: bool = True
    #: an assistant message may end the prompt (a shared prefix is read on: readon.py)
    prefill: bool = False
    #: it takes llama.cpp's ``grammar`` field (method="grammar")
    grammar: bool = False
    #: where api="auto" re-asks when the route is missing or carries no distribution here
    fallback: str | None = None
    #: tried by api="auto" (in registry order) when the client has the path
    auto: bool = True
    #: the request field that caps the output (named in a truncation error)
    budget_field: str = "max_tokens"
    #: how errors name it ("the Messages API"); the name when empty
    title: str = ""
    #: the request field that asks for logprobs (a refusal naming logprobs refused this one)
    logprobs_field: str = "logprobs"
    #: one request answers one question (False: every question in one request, hosted.py)
    per_question: bool = True


__all__ = ["Builder", "Parsed", "Parser", "Surface"]
