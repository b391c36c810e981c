"""What ``/docs`` tells a user about the two decision routes: their descriptions and request bodies to paste.

Each example is a whole request (OpenAPI's Example Object: a summary and a value), on the gateway's default
model; the tests validate every one against its route's request model and send it.
"""

from __future__ import annotations

from typing import Any

#: The model the examples name: the embedded default, what ``jev serve`` serves without ``--backend-url``.
EXAMPLE_MODEL = "qwen2.5-coder-1.5b"
_TICKET = "I was charged twice for my subscription this month. Please refund the extra payment."
_SPAM: dict[str, Any] = {"type": "noul", "instructions": "This message is spam or a scam, not a real customer request."}
_TEAM: dict[str, Any] = {"type": "choice", "instructions": "Which team should handle this support ticket?",
         "criteria": {"billing": "payments, invoices, refunds, charges",
                      "technical": "bugs, crashes, errors, outages, login problems",
                      "sales": "quotes, pricing, new plans, upgrades"}}
_URGENCY: dict[str, Any] = {"type": "score", "instructions": "How urgent is this ticket?",
            "criteria": ["can wait a week", "within a day or two", "today", "right now: money or access is at stake"]}

SYSTEMONE_DESCRIPTION = """\
Ask typed questions about a **state** (text, a JSON object or list, or chat turns) and get each answer as a
probability distribution, read from the logprobs of one answer token:

- **noul**: a yes/no statement; `noul` is the probability that it is true.
- **choice**: one of named options (`criteria`: option → description); `choice` is the most probable option,
  with `probabilities` and `confidence`.
- **score**: ordered levels 0..n-1 (`criteria`: the levels' descriptions, 2 to 10); `score` is the expected
  level, with `probabilities` keyed "0", "1", ... and `confidence`.

`model` is one of `GET /v1/models`. Answers come keyed by the question ids, in the request's order; `usage`
counts tokens and backend calls. Options (`request.total_timeout_seconds`, `request.prompt_layout`,
`backend.timeout_seconds`, ...) may also be given flat at the top level. Send the key as
`Authorization: Bearer KEY` when the gateway has keys. An error is `{"error": {"type", "message"}}`, naming
the question and field where one is at fault."""

SYSTEMONE_EXAMPLES: dict[str, dict[str, Any]] = {
    "noul": {"summary": "A yes/no question (noul)",
             "value": {"model": EXAMPLE_MODEL, "state": _TICKET, "questions": {"spam": _SPAM}}},
    "choice": {"summary": "Pick a team (choice)",
               "value": {"model": EXAMPLE_MODEL, "state": _TICKET, "questions": {"team": _TEAM}}},
    "score": {"summary": "How urgent (score)",
              "value": {"model": EXAMPLE_MODEL, "state": _TICKET, "questions": {"urgency": _URGENCY}}},
    "all": {"summary": "All three about a JSON state, with a time limit",
            "value": {"model": EXAMPLE_MODEL,
                      "state": {"subject": "Refund", "body": _TICKET, "plan": "team"},
                      "questions": {"team": _TEAM, "urgency": _URGENCY, "spam": _SPAM},
                      "request": {"total_timeout_seconds": 30}}},
}

DECISIONS_DESCRIPTION = """\
The same engine behind OpenAI's Decisions API shape (`client.decisions.create(model, input, questions)`):
`predicate` (the engine's noul: the probability that a statement is true), `choice` (typed values, strings or
booleans) and `score` (ordered levels). `input` is text or messages; answers come as a list in the questions'
order, each with its `name`. `model` is one of `GET /v1/models`; send `Authorization: Bearer KEY` when the
gateway has keys."""

DECISIONS_EXAMPLES: dict[str, dict[str, Any]] = {
    "ticket": {"summary": "A predicate, a choice and a score about one ticket",
               "value": {"model": EXAMPLE_MODEL, "input": _TICKET, "questions": [
                   {"type": "predicate", "name": "spam", "instructions": _SPAM["instructions"]},
                   {"type": "choice", "name": "team", "instructions": _TEAM["instructions"],
                    "choices": [{"value": k, "description": v} for k, v in _TEAM["criteria"].items()]},
                   {"type": "score", "name": "urgency", "instructions": _URGENCY["instructions"],
                    "levels": [{"label": level} for level in _URGENCY["criteria"]]}]}},
    "messages": {"summary": "A yes/no question about a conversation",
                 "value": {"model": EXAMPLE_MODEL, "input": [
                     {"role": "user", "content": "Can I get my money back for the second charge?"},
                     {"role": "assistant", "content": "Yes, I have refunded it; it shows in 3 to 5 days."}],
                     "questions": [{"type": "predicate", "name": "resolved",
                                    "instructions": "The customer's request was resolved."}]}},
}


def request_examples(examples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """An operation's ``openapi_extra`` part that puts ``examples`` on its JSON request body (FastAPI merges it
    into the body it documents)."""
    return {"requestBody": {"content": {"application/json": {"examples": examples}}}}


def with_examples(body: dict[str, Any], examples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A ``requestBody`` written whole (a route that reads its own body) with ``examples`` on its JSON content."""
    content = body["content"]["application/json"]
    return {**body, "content": {**body["content"], "application/json": {**content, "examples": examples}}}
