"""Write the cassettes that cannot be recorded here, from the providers' documented shapes.

No server on this machine refuses, filters, rate-limits or drops logprobs, so these cassettes are
written from the shapes in shared/PROVIDERS.md and the providers' API references, and named
``documented_*`` so nobody mistakes them for recordings. Tests replay them matching on method and
path only (their request bodies are illustrative).

    python scripts/write_documented_cassettes.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

CASSETTES = Path(__file__).resolve().parent.parent / "cassettes"
URI = "http://127.0.0.1:9/v1/chat/completions"
SOURCES: dict[str, str] = {}


def window(pairs: list[tuple[str, float]]) -> dict[str, Any]:
    """A Chat Completions logprobs object for one answer token with its alternatives."""
    top = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in pairs]
    return {"content": [{"token": pairs[0][0], "logprob": pairs[0][1], "bytes": list(pairs[0][0].encode()),
                         "top_logprobs": top}]}


def completion(content: str | None = None, *, finish: str = "stop", logprobs: Any = None,
               refusal: str | None = None, reasoning: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return {
        "id": "chatcmpl-documented", "object": "chat.completion", "created": 1764000000, "model": "documented-model",
        "choices": [{"index": 0, "message": message, "logprobs": logprobs, "finish_reason": finish}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 1 if content and len(content) < 3 else 12,
                  "total_tokens": 132},
    }


def error(status: int, message: str, *, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error",
                      "param": param, "code": code}}


def interaction(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None) -> dict[str, Any]:
    reason = {200: "OK", 400: "Bad Request", 429: "Too Many Requests", 500: "Internal Server Error"}[status]
    return {
        "request": {"body": "{}", "headers": {"content-type": ["application/json"]}, "method": "POST", "uri": URI},
        "response": {
            "body": {"string": json.dumps(body)},
            "headers": {"content-type": ["application/json"], **{k: [v] for k, v in (headers or {}).items()}},
            "status": {"code": status, "message": reason},
        },
    }


LABELLED = window([("A", -0.12), ("B", -2.47), ("C", -3.48), ("The", -5.0)])
STRUCTURED = completion(json.dumps({"probabilities": {"billing": 0.7, "technical": 0.2, "sales": 0.1}}))

DOCUMENTED: dict[str, tuple[str, list[dict[str, Any]]]] = {
    "documented_refusal": (
        "OpenAI Chat Completions: a refusal arrives as message.refusal with null content",
        [interaction(completion(None, refusal="I'm sorry, I can't help with that request."))],
    ),
    "documented_content_filter": (
        "OpenAI / Azure Chat Completions: finish_reason 'content_filter' with the content withheld",
        [interaction(completion("", finish="content_filter"))],
    ),
    "documented_logprobs_null": (
        "OpenRouter: some models answer HTTP 200 with logprobs null; then a structured answer",
        [interaction(completion("A", finish="length", logprobs=None)), interaction(STRUCTURED),
         interaction(completion("B", finish="length", logprobs=None)), interaction(STRUCTURED),
         interaction(STRUCTURED)],
    ),
    "documented_reasoning_only": (
        "llama.cpp / vLLM with a reasoning parser: the reasoning in reasoning_content, no answer in content",
        [interaction(completion("", finish="stop", reasoning="Let me think about which team fits best...")),
         interaction(completion(None, finish="stop", reasoning="Still thinking about the ticket..."))],
    ),
    "documented_think_block": (
        "Servers without a reasoning parser: the think block inline in content, before the JSON answer",
        [interaction(completion('<think>The ticket asks for a refund, so billing.</think>\n'
                                '{"billing": 9, "technical": 1, "sales": 0}'))],
    ),
    "documented_reasoning_field": (
        "OpenRouter / vLLM: reasoning in the separate `reasoning` field, the JSON answer in content",
        [interaction({**completion('{"billing": 8, "technical": 2, "sales": 0}'),
                      "choices": [{"index": 0, "finish_reason": "stop", "logprobs": None,
                                   "message": {"role": "assistant", "content": '{"billing": 8, "technical": 2, "sales": 0}',
                                               "reasoning": "A duplicate charge is a billing matter."}}]})],
    ),
    "documented_429_then_success": (
        "OpenAI: 429 rate limit with retry-after-ms, then success",
        [interaction(error(429, "Rate limit reached for requests", code="rate_limit_exceeded"), 429,
                     {"retry-after-ms": "20", "retry-after": "1"}),
         interaction(completion("A", finish="length", logprobs=LABELLED))],
    ),
    "documented_400_logprobs_refused": (
        "OpenAI reasoning models: 400 refusing the logprobs field; then structured answers",
        [interaction(error(400, "logprobs is not supported with this model.", param="logprobs",
                           code="unsupported_parameter"), 400),
         interaction(STRUCTURED), interaction(STRUCTURED)],
    ),
    "documented_400_field_refused": (
        "OpenAI: 400 'Unrecognized request argument supplied: chat_template_kwargs', then success without it",
        [interaction(error(400, "Unrecognized request argument supplied: chat_template_kwargs"), 400),
         interaction(completion("A", finish="length", logprobs=LABELLED)),
         interaction(completion("A", finish="length", logprobs=LABELLED))],
    ),
    "documented_400_top_logprobs_value": (
        "OpenRouter: 400 for a top_logprobs value above the model's cap; then structured; later logprobs again",
        [interaction(error(400, "Invalid 'top_logprobs': integer must be between 0 and 5, but got 20."), 400),
         interaction(STRUCTURED),
         interaction(completion("A", finish="length", logprobs=LABELLED))],
    ),
    "documented_500_then_structured": (
        "A 5xx that survives the retries (OpenAI models that fail on top_logprobs); then structured",
        [interaction(error(500, "The server had an error while processing your request."), 500),
         interaction(STRUCTURED),
         interaction(error(500, "The server had an error while processing your request."), 500),
         interaction(STRUCTURED)],
    ),
    "documented_openai_minus_9999": (
        "OpenAI: tokens outside the window reported with logprob -9999.0",
        [interaction(completion("A", finish="length", logprobs=window([("A", -0.3), ("B", -9999.0), ("C", -1.6)])))],
    ),
}


sys.path.insert(0, str(Path(__file__).resolve().parent))
import cassettes_readme  # noqa: E402


def main() -> None:
    CASSETTES.mkdir(exist_ok=True)
    index = {}
    for name, (source, interactions) in DOCUMENTED.items():
        path = CASSETTES / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"interactions": interactions, "version": 1}, sort_keys=False))
        index[name] = source
    (CASSETTES / "documented.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {len(DOCUMENTED)} documented cassettes")
    cassettes_readme.main()


if __name__ == "__main__":
    main()
