"""Methods: what each readout method adds to a request, and the answer format it asks for.

``logprobs`` and ``grammar`` read one label token; ``structured`` (per-option probabilities),
``discrete`` (one option) and ``ratings`` (System 2: 0–10 per candidate) read one JSON object.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .exact import exact_fields, exact_ids
from .pathread import PathPlan, path_plan
from .prompt import LABEL, AnswerFormat
from .questions import TOKEN_METHODS, Prepared

METHODS = ("auto", "logprobs", "grammar", "structured", "discrete")
TOKEN_READOUT = TOKEN_METHODS  # one list: questions checks option counts against it
JSON_READOUT = frozenset({"structured", "discrete", "ratings"})


@dataclass(frozen=True)
class MethodConfig:
    top_logprobs: int = 20
    #: None (unset) and False turn thinking off for System 1; System 2 sends the off switch only on False.
    thinking: bool | None = None
    structured_outputs: bool = True
    #: The first token id of each answer word's spellings, where the server reads those tokens exactly
    #: (the embedded llama.cpp, :mod:`exact`); None elsewhere: the top-``top_logprobs`` window is read.
    token_ids: Mapping[str, int] | None = None
    #: With ``token_ids``: each answer word's token ids, so names sharing a first token are read in one call
    #: (:mod:`pathread`).
    token_paths: Mapping[str, tuple[int, ...]] | None = None
    #: With ``token_paths``: the texts of those tokens, where the server's tokenizer gives them.
    token_texts: Mapping[str, tuple[str, ...]] | None = None


def grammar_for(labels: tuple[str, ...]) -> str:
    """GBNF accepting exactly one label: root ::= "A" | "B" | …"""
    return "root ::= " + " | ".join(json.dumps(lab) for lab in labels)


def _object(props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


def schema_for(method: str, prep: Prepared) -> dict[str, Any]:
    """Strict-compatible schema: every property required, no additional properties."""
    if method == "structured":
        if prep.kind == "noul":
            return _object({"noul": {"type": "number", "minimum": 0, "maximum": 1}})
        return _object({"probabilities": _object({k: {"type": "number", "minimum": 0} for k in prep.keys})})
    if method == "discrete":
        if prep.kind == "noul":
            return _object({"noul": {"type": "boolean"}})
        if prep.kind == "score":
            return _object({"score": {"type": "integer", "enum": list(range(len(prep.keys)))}})
        return _object({"choice": {"type": "string", "enum": list(prep.keys)}})
    if method == "ratings":
        return _object({k: {"type": "integer", "minimum": 0, "maximum": 10} for k in prep.keys})
    raise ValueError(f"no schema for method {method!r}")


_ASKS = {
    "structured": "Give the probability that each option is the right one; the probabilities sum to 1.",
    "discrete": "Pick the single option that fits best.",
    "ratings": (
        "Think it through, then rate each candidate with an integer from 0 (does not fit at all) "
        "to 10 (fits perfectly)."
    ),
}
_NOUL_ASKS = {
    "structured": "Give the probability (0 to 1) that the statement is true.",
    "discrete": "Say whether the statement is true (true) or false (false).",
}


def answer_format(method: str, prep: Prepared) -> AnswerFormat:
    if method in TOKEN_READOUT:
        return LABEL
    ask = _NOUL_ASKS.get(method, _ASKS[method]) if prep.kind == "noul" else _ASKS[method]
    return AnswerFormat(kind="json", schema=schema_for(method, prep), ask=ask)


def example_json(method: str, prep: Prepared) -> Callable[[str], Any]:
    """The reply a few-shot example shows for the right answer ``key`` under a JSON method."""

    def reply(key: str) -> Any:
        if method == "structured":
            if prep.kind == "noul":
                return {"noul": 1.0 if key == "true" else 0.0}
            return {"probabilities": {k: 1.0 if k == key else 0.0 for k in prep.keys}}
        if method == "discrete":
            if prep.kind == "noul":
                return {"noul": key == "true"}
            if prep.kind == "score":
                return {"score": int(key)}
            return {"choice": key}
        return {k: 10 if k == key else 0 for k in prep.keys}

    return reply


def path_plan_for(method: str, symbols: tuple[str, ...], cfg: MethodConfig) -> PathPlan | None:
    """Names read in one call where they share a first token (:mod:`pathread`): exact reads only, and only where
    the flow reads a shared prefix on (the caller's word)."""
    if method != "logprobs" or cfg.thinking is True:
        return None
    return path_plan(symbols, cfg.token_ids, cfg.token_paths, cfg.token_texts)


def request_fields(method: str, prep: Prepared, cfg: MethodConfig,
                   symbols: tuple[str, ...] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(standard fields, extra_body fields) for one question under ``method``.

    ``symbols`` are what a token method's answer may be (letters by default; names, digits, yes/no).
    Under ``logprobs``, where ``cfg.token_ids`` holds every symbol's spellings, the symbols' own tokens
    are read (:mod:`exact`) instead of the window.
    """
    fields: dict[str, Any] = {"temperature": 0}
    extra: dict[str, Any] = {}
    if method in TOKEN_READOUT:
        fields["logprobs"] = True
        fields["top_logprobs"] = cfg.top_logprobs
        if cfg.thinking is not True:
            fields["max_tokens"] = 1
            extra["chat_template_kwargs"] = {"enable_thinking": False}
        if method == "grammar":
            extra["grammar"] = grammar_for(symbols or prep.labels)
        ids = exact_ids(symbols or prep.labels, cfg.token_ids) if method == "logprobs" else None
        if ids and cfg.thinking is not True:
            exact, exact_extra = exact_fields(ids)
            fields.update(exact)
            extra.update(exact_extra)
        return fields, extra
    schema = schema_for(method, prep)
    if cfg.structured_outputs:
        name = f"jev_{prep.kind}" if method != "ratings" else "jev_ratings"
        fields["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    else:
        fields["response_format"] = {"type": "json_object"}
    if cfg.thinking is False:
        fields["reasoning_effort"] = "none"
    return fields, extra
