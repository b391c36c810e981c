"""``jev_shared.openai_client``: any OpenAI-compatible server gets the direct post, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest

from jev_shared import AsyncSystemOneClient, Choice, Memory, SystemOneClient, direct, openai_client
from jev_shared.backend import Backend
from jev_shared.direct import sdk_client
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


def _recording(asynchronous: bool) -> tuple[Any, list[httpx.Request]]:
    """An HTTP client (sync or async) whose transport keeps every request and answers one-token replies."""
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=r.chat("A"))

    transport = httpx.MockTransport(handler)
    return (httpx.AsyncClient(transport=transport) if asynchronous else httpx.Client(transport=transport)), seen


def _wire(request: httpx.Request) -> tuple[Any, ...]:
    return request.method, str(request.url), list(request.headers.raw), request.content


@pytest.mark.parametrize("asynchronous", [False, True])
def test_the_direct_post_sends_the_headers_and_url_a_plain_post_would(asynchronous: bool) -> None:
    """The route's URL and the fixed headers are built once (direct.py), yet every request carries the same method,
    URL, header names, values and order, and body as the HTTP client's own post of the URL text with a plain dict
    of those headers; per-call ``extra_headers`` still join them."""
    http, seen = _recording(asynchronous)
    sdk = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    _, target = sdk_client(sdk, lambda: None, "http://backend.test/v1", "key-0123456789", http_client=http)
    assert target is not None
    body = {"model": "m", "messages": [{"role": "user", "content": "Zoë"}], "max_tokens": 1}
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    plain = {"url": "http://backend.test/v1/chat/completions", "content": data, "timeout": 5.0}

    async def posts() -> None:
        for _ in range(2):  # the second reuses what the first built
            await direct.apost(target, "/chat/completions", 5.0, **body)
        await direct.apost(target, "chat/completions", 5.0, **body, extra_headers={"X-Trace": "t1"})
        await http.post(**plain, headers=dict(target.headers))
        await http.post(**plain, headers={**target.headers, "X-Trace": "t1"})

    if asynchronous:
        asyncio.run(posts())
    else:
        for _ in range(2):
            direct.post(target, "/chat/completions", 5.0, **body)
        direct.post(target, "chat/completions", 5.0, **body, extra_headers={"X-Trace": "t1"})
        http.post(**plain, headers=dict(target.headers))
        http.post(**plain, headers={**target.headers, "X-Trace": "t1"})
    first, again, traced, expected, expected_traced = (_wire(q) for q in seen)
    assert first == again == expected and traced == expected_traced
    assert (b"Authorization", b"Bearer key-0123456789") in [(k, v) for k, v in expected[2]]
