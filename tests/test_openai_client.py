"""``jev_shared.openai_client`` (issue 33): any OpenAI-compatible server gets the direct post, over real loopback HTTP."""

from __future__ import annotations

import asyncio

import openai

from jev_shared import AsyncSystemOneClient, Choice, Memory, SystemOneClient, openai_client
from jev_shared.backend import Backend
from tests.helpers import replies as r
from tests.helpers.server import Loopback

TEAM = Choice(instructions="Which team?", criteria={"billing": "money", "sales": "buying"})


def _ask(client: object) -> str:
    engine = SystemOneClient(client, model="m", api="chat_completions", memory=Memory(), labels="letters", debias=False)
    return engine.system_one("I paid twice", {"team": TEAM}).answers["team"].choice


def test_the_client_is_posted_to_directly_with_the_sdks_bytes() -> None:
    """The same body bytes and key as a plain SDK client's, none of the SDK's own headers: it went past the SDK."""
    with Loopback(r.windows({"A": -0.1, "B": -2.0})) as srv:
        built = openai_client(srv.base_url, "key-0123456789")
        assert isinstance(built, openai.OpenAI) and Backend.of(built).http is not None
        plain = openai.OpenAI(base_url=srv.base_url, api_key="key-0123456789")
        assert [_ask(built), _ask(plain)] == ["billing", "billing"]
        direct, via_sdk = srv.log
    assert direct.raw == via_sdk.raw and direct.path == "/v1/chat/completions"
    assert direct.headers["authorization"] == "Bearer key-0123456789"
    assert not [h for h in direct.headers if h.startswith("x-stainless")] and "x-stainless-retry-count" in via_sdk.headers


def test_the_async_client_and_sdk_only_options() -> None:
    """``asynchronous=True`` gives an ``AsyncOpenAI`` posted directly; an option only the SDK knows (headers) keeps
    the SDK's post, so the header still goes out."""
    with Loopback(r.windows({"A": -0.1, "B": -2.0})) as srv:
        built = openai_client(srv.base_url, "key-0123456789", asynchronous=True)
        assert isinstance(built, openai.AsyncOpenAI) and Backend.of(built).http is not None
        engine = AsyncSystemOneClient(built, model="m", api="chat_completions", memory=Memory(), labels="letters",
                                      debias=False)
        resp = asyncio.run(engine.system_one("I paid twice", {"team": TEAM}))
        assert resp.answers["team"].choice == "billing"
        headed = openai_client(srv.base_url, "key-0123456789", default_headers={"X-Team": "ops"})
        assert Backend.of(headed).http is None
        assert _ask(headed) == "billing"
        _, via_sdk = srv.log
    assert via_sdk.headers["x-team"] == "ops"
