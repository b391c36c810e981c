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


def interaction(body: dict[str, Any], status: int = 200, headers: dict[str, str] | None = None,
                uri: str = URI) -> dict[str, Any]:
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 422: "Unprocessable Entity",
              429: "Too Many Requests", 500: "Internal Server Error", 529: "Overloaded"}[status]
    return {
        "request": {"body": "{}", "headers": {"content-type": ["application/json"]}, "method": "POST", "uri": uri},
        "response": {
            "body": {"string": json.dumps(body)},
            "headers": {"content-type": ["application/json"], **{k: [v] for k, v in (headers or {}).items()}},
            "status": {"code": status, "message": reason},
        },
    }


RESPONSES_URI = "http://127.0.0.1:9/v1/responses"
MESSAGES_URI = "http://127.0.0.1:9/v1/messages"
SYSTEMONE_URI = "http://127.0.0.1:9/v1/systemone"
DECISIONS_URI = "http://127.0.0.1:9/v1/decisions"


def response(text: str | None = None, *, logprobs: list[dict[str, Any]] | None = None, status: str = "completed",
             reason: str | None = None, refusal: str | None = None) -> dict[str, Any]:
    """An OpenAI Responses object with one message output item."""
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []})
    if refusal is not None:
        content.append({"type": "refusal", "refusal": refusal})
    return {"id": "resp_documented", "object": "response", "model": "documented-model", "status": status,
            "incomplete_details": {"reason": reason} if reason else None,
            "output": [{"type": "message", "id": "msg_documented", "role": "assistant", "status": status,
                        "content": content}],
            "usage": {"input_tokens": 120, "output_tokens": 1, "total_tokens": 121}}


def anthropic(text: str, stop_reason: str = "end_turn") -> dict[str, Any]:
    """An Anthropic Messages object."""
    return {"id": "msg_documented", "type": "message", "role": "assistant", "model": "documented-model",
            "content": [{"type": "text", "text": text}] if text else [], "stop_reason": stop_reason,
            "stop_sequence": None, "usage": {"input_tokens": 150, "output_tokens": 20}}


SYSTEMONE_OK = {
    "model": "documented-model",
    "answers": {
        "team": {"type": "choice", "choice": "billing", "confidence": 0.827310974,
                 "probabilities": {"billing": 0.884873983, "technical": 0.08438969, "sales": 0.030736327}},
        "urgency": {"type": "score", "score": 1.2, "confidence": 0.4, "legend": {"0": "low", "1": "mid", "2": "high"},
                    "probabilities": {"0": 0.1, "1": 0.6, "2": 0.3}},
        "spam": {"type": "noul", "noul": 0.03},
    },
    "usage": {"input_tokens": 310, "output_tokens": 3},
}
DECISIONS_OK = {
    "model": "gpt-6-luna",
    "answers": [
        {"type": "choice", "name": "team", "choice": "billing", "confidence": 0.83,
         "probabilities": [{"value": "billing", "probability": 0.88}, {"value": "technical", "probability": 0.09},
                           {"value": "sales", "probability": 0.03}]},
        {"type": "score", "name": "urgency", "score": 1.2, "confidence": 0.4,
         "probabilities": [{"label": "low", "value": 0, "probability": 0.1},
                           {"label": "mid", "value": 1, "probability": 0.6},
                           {"label": "high", "value": 2, "probability": 0.3}]},
        {"type": "predicate", "name": "spam", "probability": 0.03},
    ],
    "usage": {"input_tokens": 300, "input_tokens_details": {"cache_write_tokens": 0, "cached_tokens": 0},
              "output_tokens": 3, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 303},
}
ONE_TOKEN = [{"token": "A", "logprob": -0.12, "bytes": [65],
              "top_logprobs": [{"token": "A", "logprob": -0.12, "bytes": [65]},
                               {"token": "B", "logprob": -2.47, "bytes": [66]},
                               {"token": "C", "logprob": -3.48, "bytes": [67]}]}]

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
    "documented_500_outage": (
        "A 5xx that outlives the retries (an outage), then the server is back: logprobs again",
        [interaction(error(500, "The server had an error while processing your request."), 500),
         interaction(error(500, "The server had an error while processing your request."), 500),
         interaction(completion("A", finish="length", logprobs=LABELLED))],
    ),
    "documented_400_logprobs_unsupported": (
        "A 400 that refuses logprobs only in its structured fields (param, code): then structured",
        [interaction(error(400, "This model does not support logprobs", param="logprobs",
                           code="unsupported_parameter"), 400),
         interaction(STRUCTURED)],
    ),
    "documented_responses_400_logprobs": (
        "A Responses 400 'logprobs is not supported' (logprobs ride in include there): then structured",
        [interaction(error(400, "logprobs is not supported"), 400, uri=RESPONSES_URI),
         interaction(response(json.dumps({"probabilities": {"billing": 0.7, "technical": 0.2, "sales": 0.1}})),
                     uri=RESPONSES_URI)],
    ),
    "documented_openai_minus_9999": (
        "OpenAI: tokens outside the window reported with logprob -9999.0",
        [interaction(completion("A", finish="length", logprobs=window([("A", -0.3), ("B", -9999.0), ("C", -1.6)])))],
    ),
    # --- Responses (OpenAI's documented shapes) ---
    "documented_responses_logprobs": (
        "OpenAI Responses: logprobs of the output text through include=['message.output_text.logprobs']",
        [interaction(response("A", logprobs=ONE_TOKEN), uri=RESPONSES_URI)],
    ),
    "documented_responses_incomplete": (
        "OpenAI Responses: status 'incomplete' with incomplete_details.reason 'max_output_tokens'",
        [interaction(response('{"probabilities": {"bill', status="incomplete", reason="max_output_tokens"),
                     uri=RESPONSES_URI)] * 2,
    ),
    "documented_responses_refusal": (
        "OpenAI Responses: a refusal content part in the message output item",
        [interaction(response(refusal="I can't help with that."), uri=RESPONSES_URI)],
    ),
    "documented_responses_404": (
        "A server without the Responses route: 404 not naming the model; then Chat Completions",
        [interaction({"error": {"message": "Not Found", "type": "not_found"}}, 404, uri=RESPONSES_URI),
         interaction(completion("A", finish="length", logprobs=LABELLED)),
         interaction(completion("A", finish="length", logprobs=LABELLED))],
    ),
    # --- Messages (Anthropic's documented shapes) ---
    "documented_messages_structured": (
        "Anthropic Messages: a JSON answer in a text block, stop_reason 'end_turn'",
        [interaction(anthropic('{"probabilities": {"billing": 0.8, "technical": 0.15, "sales": 0.05}}'),
                     uri=MESSAGES_URI)],
    ),
    "documented_messages_max_tokens": (
        "Anthropic Messages: stop_reason 'max_tokens' with a cut-off answer",
        [interaction(anthropic('{"probabilities": {"bil', "max_tokens"), uri=MESSAGES_URI)] * 2,
    ),
    "documented_messages_refusal": (
        "Anthropic Messages: stop_reason 'refusal'",
        [interaction(anthropic("", "refusal"), uri=MESSAGES_URI)],
    ),
    "documented_messages_context": (
        "Anthropic Messages: stop_reason 'model_context_window_exceeded'",
        [interaction(anthropic("", "model_context_window_exceeded"), uri=MESSAGES_URI)],
    ),
    # --- the hosted System One API (its documented envelopes) ---
    "documented_systemone_ok": (
        "Hosted System One: answers keyed like the questions, usage {input_tokens, output_tokens}",
        [interaction(SYSTEMONE_OK, headers={"x-typesafe-request-id": "req_documented_1"}, uri=SYSTEMONE_URI)],
    ),
    "documented_systemone_401": (
        "Hosted System One: 401 for a missing or wrong key",
        [interaction({"error": {"type": "unauthorized", "message": "invalid API key"}}, 401,
                     headers={"x-typesafe-request-id": "req_documented_2"}, uri=SYSTEMONE_URI)],
    ),
    "documented_systemone_422": (
        "Hosted System One: 422 whose body names the field",
        [interaction({"error": {"type": "invalid_request", "message": "choice takes at most 255 options",
                                "field": "questions.team.criteria"}}, 422, uri=SYSTEMONE_URI)],
    ),
    "documented_systemone_429_then_ok": (
        "Hosted System One: 429 with retry-after, then success",
        [interaction({"error": {"type": "rate_limited", "message": "slow down"}}, 429, {"retry-after": "0.01"},
                     uri=SYSTEMONE_URI),
         interaction(SYSTEMONE_OK, uri=SYSTEMONE_URI)],
    ),
    "documented_systemone_529": (
        "Hosted System One: 529 overloaded, through every retry",
        [interaction({"error": {"type": "overloaded", "message": "overloaded"}}, 529, {"retry-after": "0.01"},
                     uri=SYSTEMONE_URI)] * 2,
    ),
    # --- OpenAI Decisions (openai 3.x's documented types) ---
    "documented_decisions_ok": (
        "OpenAI Decisions: answers in question order (choice, score, predicate)",
        [interaction(DECISIONS_OK, uri=DECISIONS_URI)],
    ),
    "documented_decisions_refusal": (
        "OpenAI Decisions: a per-question refusal answer",
        [interaction({**DECISIONS_OK, "answers": [DECISIONS_OK["answers"][0], {"type": "refusal", "name": "urgency"},
                                                  DECISIONS_OK["answers"][2]]}, uri=DECISIONS_URI)],
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
