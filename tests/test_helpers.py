"""The provider double itself: the real SDKs send real HTTP to the handler, every request recorded."""

from __future__ import annotations

import asyncio

import pytest

from jev_shared import AsyncSystemOneClient, Choice, Noul, ProviderError, SystemOneClient
from tests.helpers import Reset, anthropic_provider, aprovider, fails, in_turn, provider, windows
from tests.helpers import replies as r
from tests.helpers.provider import http_of

TEAM = Choice(instructions="Which team?", criteria={"billing": "", "technical": ""})


def test_the_sync_client_is_the_real_sdk_and_records_the_wire():
    import openai

    client = provider(windows({"billing": -0.1, "technical": -3.0}))
    assert type(client) is openai.OpenAI
    assert http_of(openai).__name__ == ("httpx2" if openai.__version__.startswith("3") else "httpx")
    resp = SystemOneClient(client, model="m").system_one("x", {"team": TEAM})
    assert resp.answers["team"].choice == "billing"
    (sent,) = client.wire
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent["model"] == "m" and sent["max_tokens"] == 1 and sent.headers["authorization"].startswith("Bearer ")


def test_the_async_client_overlaps_requests():
    client = aprovider(windows({"billing": -0.1, "technical": -3.0}), delay=0.05)
    qs = {f"q{i}": Noul(instructions=f"Statement {i}.") for i in range(3)}
    asyncio.run(AsyncSystemOneClient(client, model="m", api="chat_completions").system_one("x", qs))
    assert len(client.wire) == 3 and client.wire.peak == 3


def test_errors_and_resets_reach_the_engine_as_the_sdk_raises_them():
    client = provider(fails(400, "bad field", param="logprobs", code="unsupported_parameter"))
    with pytest.raises(ProviderError, match="bad field") as err:
        SystemOneClient(client, model="m", method="structured").system_one("x", {"team": TEAM})
    assert err.value.status_code == 400 and err.value.body["param"] == "logprobs"  # the SDK hands on the inner object
    reset = provider(in_turn(lambda _req: Reset()))
    engine = SystemOneClient(reset, model="m", max_retries=1)
    engine.retry_policy = type(engine.retry_policy)(max_retries=1, initial_s=0.0, max_s=0.0)
    with pytest.raises(ProviderError):
        engine.system_one("x", {"team": TEAM})
    assert len(reset.wire) == 2  # a connection error is transient: retried once


def test_the_anthropic_client_speaks_messages():
    client = anthropic_provider(in_turn(r.messages([r.text_block('{"probabilities": {"billing": 0.9, "technical": 0.1}}')])))
    resp = SystemOneClient(client, model="claude", api="messages").system_one("x", {"team": TEAM})
    assert resp.answers["team"].choice == "billing" and client.wire[0].path == "/v1/messages"
