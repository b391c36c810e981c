"""The bytes each kind of request sends, pinned, and what each says it is for (``Call.intent``).

Every intent a flow gives its requests is driven here over the real openai SDK (``httpx.MockTransport``): a
question's answer, its repair turn, a read-on of names that share a prefix, the debias prior's content-free twin
and other content-free states, the held-out priors of a question with examples, and a hosted call. Each request's
body is checked byte for byte against ``golden/call_intents.json``; a change to what the engine sends shows here.
Rewrite the file with ``python -m tests.test_call_intents`` only where the change is meant.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import openai

from jev_shared import Choice, Example, Memory, Noul, ProviderError, SystemOneClient
from jev_shared.backend import describe
from tests.helpers.replies import chat, chat_tokens

GOLDEN = Path(__file__).parent / "golden" / "call_intents.json"
NAMES = {"declined_card_payment": "declined card payment", "declined_transfer": "declined transfer",
         "card_payment": "card payment"}
WINDOWS = {None: [("declined", -0.2), ("card", -2.0)], "declined": [("_", -0.01), ("ly", -6.0)],
           "declined_": [("transfer", -0.1), ("card", -2.5)]}
TEAM = Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"},
              examples=[Example(state="I was charged twice", answer="billing"),
                        Example(state="The app crashes", answer="technical")])
SPAM = Noul(instructions="This is spam.")


def _reply(request: httpx.Request) -> httpx.Response:
    if request.url.path.endswith("/systemone"):
        return httpx.Response(400, json={"error": {"message": "no such service here", "type": "invalid_request_error"}})
    body = json.loads(request.content)
    last = body["messages"][-1]
    if "response_format" in body:  # a JSON answer: unreadable first, then read after the repair turn
        repaired = last["content"].startswith("Your previous reply was invalid")
        return httpx.Response(200, json=chat('{"noul": 0.8}' if repaired else "not json", usage=(10, 4)))
    if last["role"] == "assistant":
        return httpx.Response(200, json=chat_tokens(WINDOWS[last["content"]], usage=(10, 1)))
    window = [("billing", -0.3), ("technical", -1.5)] if "Which team?" in body["messages"][0]["content"] else \
        WINDOWS[None]
    return httpx.Response(200, json=chat_tokens(window, usage=(10, 1)))


class _Seen:
    """A send wrapper (the hook the kept prompts use) that sees each request as the flow yields it."""

    pending = False

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def wrap(self, send: Any, firsts: Any = None) -> Any:
        def sending(call: Any) -> Any:
            self.calls.append(call)
            return send(call)
        return sending


def _client(seen: _Seen, **options: Any) -> SystemOneClient:
    sdk = openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="k", max_retries=0,
                        http_client=httpx.Client(transport=httpx.MockTransport(_reply)))
    return SystemOneClient(describe(sdk, slots=seen), model="some-model", calibrator=None, memory=Memory(),
                           max_concurrency=1, **options)


def sent() -> list[dict[str, Any]]:
    """Each request of the scenes below, in order: its intent and its keyword arguments."""
    seen = _Seen()
    chat_only = {"api": "chat_completions"}
    _client(seen, debias=True, method="logprobs", **chat_only).system_one(
        "my transfer was declined", {"q": Choice(instructions="Which intent?", criteria=NAMES)})
    _client(seen, debias=True, method="logprobs", **chat_only).system_one("refund me", {"team": TEAM})
    _client(seen, debias=False, method="structured", **chat_only).system_one("win a prize", {"spam": SPAM})
    try:
        _client(seen, api="systemone").system_one("win a prize", {"spam": SPAM})
    except ProviderError:
        pass
    return [{"intent": str(getattr(c, "intent", "")), "kwargs": json.loads(json.dumps(c.kwargs, sort_keys=True))}
            for c in seen.calls]


def test_each_intent_sends_the_bytes_it_sent_before() -> None:
    got, want = sent(), json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert [c["intent"] for c in got] == [c["intent"] for c in want]
    for i, (g, w) in enumerate(zip(got, want)):
        assert json.dumps(g["kwargs"], sort_keys=True) == json.dumps(w["kwargs"], sort_keys=True), (i, g["intent"])


def test_every_intent_is_driven() -> None:
    assert {c["intent"] for c in sent()} == {"answer", "repair", "read-on", "prior", "content-free", "twin", "hosted"}


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else GOLDEN
    out.write_text(json.dumps(sent(), indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
