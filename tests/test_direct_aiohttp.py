"""A user's async engine client over the SDK's aiohttp client (``http_client=openai.DefaultAioHttpClient()``):
still posted to directly (the target's URL and headers are httpx2's kinds there too), with the same
bytes, and its failures the same typed errors as over the SDK's default httpx client."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import openai
import pytest

from jev_shared import AsyncSystemOneClient, Choice, Memory, openai_client
from jev_shared.backend import Backend
from jev_shared.calls import Budget, Call
from jev_shared.errors import ProviderError
from jev_shared.local import LocalServer
from jev_shared.surfaces.chat import CHAT_PATH
from jev_shared.transport import RetryPolicy, asend
from tests.helpers import replies as r
from tests.helpers.server import Loopback
from tests.helpers.wire import Hang, Reset

try:
    openai.DefaultAioHttpClient()
except RuntimeError:  # openai 2.x without httpx-aiohttp (the second pass of scripts/test.sh)
    pytest.skip("the openai SDK's aiohttp extra is not installed", allow_module_level=True)

TEAM = Choice(instructions="Which team?", criteria={"billing": "money", "sales": "buying"})
HTTP = {"aiohttp": openai.DefaultAioHttpClient, "httpx": openai.DefaultAsyncHttpxClient}


def test_an_async_engine_client_over_aiohttp_posts_directly_with_the_same_bytes() -> None:
    """One decision over each HTTP client: a target over the user's own client, the same request bytes, path and
    headers (by lower-cased name, no SDK ``x-stainless-*``), the same answer; ``LocalServer.async_client`` too."""
    async def decide(http: Any, url: str) -> str:
        client = openai_client(url, "key-0123456789", asynchronous=True, http_client=http)
        target = Backend.of(client).http
        assert target is not None and target.http is http and type(target.url("/x")).__module__.startswith("httpx")
        engine = AsyncSystemOneClient(client, model="m", api="chat_completions", memory=Memory(), labels="letters",
                                      debias=False)
        try:
            return (await engine.system_one("Zoë paid twice", {"team": TEAM})).answers["team"].choice
        finally:
            await client.close()

    with Loopback(r.windows({"A": -0.1, "B": -2.0})) as srv:
        answers = [asyncio.run(decide(make(), srv.base_url)) for make in HTTP.values()]
        aio, httpx_ = srv.log
    assert answers == ["billing", "billing"]
    assert (aio.path, aio.raw) == (httpx_.path, httpx_.raw) and list(aio.headers.items()) == list(httpx_.headers.items())
    assert not [h for h in aio.headers if h.startswith("x-stainless")]
    srv = LocalServer("smollm2-135m", prompt_cache=False)
    srv.base_url = "http://127.0.0.1:9/v1"
    assert isinstance(Backend.of(srv.async_client(http_client=openai.DefaultAioHttpClient())).http.http,
                      openai.DefaultAioHttpClient)


def _refused() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


FAULTS = {"refused": None, "reset": lambda q: Reset(), "timeout": lambda q: Hang(2.0),
          "500 json": lambda q: r.error_reply(q, 500, "boom", code="server_error")}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failure_is_the_same_typed_error_over_either(fault: str) -> None:
    """A refused port, a reset, a timeout and a 5xx with a JSON error: the same ProviderError (type, words, status,
    body, timed out or not) over aiohttp as over httpx."""
    async def fail(make: Any, url: str) -> tuple[Any, ...]:
        client = openai_client(url, "k", asynchronous=True, max_retries=0, timeout=0.3, http_client=make())
        try:
            with pytest.raises(ProviderError) as info:
                await asend(client, Call("chat_completions", {"model": "m", "messages": []}, CHAT_PATH),
                            RetryPolicy(0, 0.0, 0.0), Budget.of(None))
        finally:
            await client.close()
        err = info.value
        return type(err), str(err), err.status_code, err.body, err.timed_out, err.code

    handler = FAULTS[fault]
    seen = []
    for make in HTTP.values():
        if handler is None:
            seen.append(asyncio.run(fail(make, _refused())))
            continue
        with Loopback(handler) as srv:
            seen.append(asyncio.run(fail(make, srv.base_url)))
    assert seen[0] == seen[1]
    assert seen[0][4] is (fault == "timeout")
