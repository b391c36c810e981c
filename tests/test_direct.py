"""The direct post (direct.py): a client the engine built over its own HTTP client is posted to with
that client, past the SDK's ``post``: the same JSON body bytes, the same typed errors, over real loopback HTTP."""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Callable
from typing import Any

import openai
import pytest

from jev_shared import Choice, Memory, SystemOneClient
from jev_shared.backend import Backend, attach
from jev_shared.calls import Budget, Call
from jev_shared.direct import HttpTarget, sdk_client
from jev_shared.errors import ProviderError
from jev_shared.local import LocalServer
from jev_shared.surfaces.chat import CHAT_PATH
from jev_shared.transport import RetryPolicy, asend, send
from tests.helpers import replies as r
from tests.helpers.server import Loopback
from tests.helpers.wire import Hang, Reply, Request, Reset, json_reply

TEAM = Choice(instructions="Which team?", criteria={"billing": "money", "sales": "buying"})
BODY = {"model": "m", "messages": [{"role": "user", "content": "Zoë paid twice — €12"}], "max_tokens": 1,
        "logprobs": True, "top_logprobs": 20, "extra_body": {"cache_prompt": True, "n_probs": 20}}


def _clients(base_url: str, sdk: Any = openai.OpenAI, http: Any = openai.DefaultHttpxClient) -> tuple[Any, Any]:
    """(a plain SDK client, a client built over its own HTTP client with the target attached), retries off."""
    own, target = sdk_client(sdk, http, base_url, "k")
    assert target is not None
    return (sdk(base_url=base_url, api_key="k").with_options(max_retries=0),
            attach(own, Backend(http=target)).with_options(max_retries=0))


def test_the_direct_post_sends_the_sdk_posts_bytes() -> None:
    """One decision over each client: byte-identical bodies (extra_body merged, non-ASCII kept) on the same route;
    the direct one carries the key but none of the SDK's own headers (it did not go through the SDK)."""
    with Loopback(r.windows({"A": -0.1, "B": -2.0})) as srv:
        plain, own = _clients(srv.base_url)
        answers = [SystemOneClient(c, model="m", api="chat_completions", memory=Memory(), labels="letters", debias=False,
                                   extra_body={"cache_prompt": True}).system_one("Zoë paid twice — €12", {"team": TEAM})
                   for c in (plain, own)]
        via_sdk, direct = srv.log
    assert [a.answers["team"].choice for a in answers] == ["billing", "billing"]
    assert via_sdk.raw == direct.raw and via_sdk.path == direct.path == "/v1/chat/completions"
    assert b'"cache_prompt":true' in direct.raw and "Zoë".encode() in direct.raw
    assert direct.headers["authorization"] == via_sdk.headers["authorization"] == "Bearer k"
    assert "x-stainless-retry-count" in via_sdk.headers and "x-stainless-retry-count" not in direct.headers


def _date(offset_s: float) -> str:
    return email.utils.formatdate(time.time() + offset_s, usegmt=True)


#: name → (handler, retries, budget seconds): every way a reply can fail, as the hostile tests meet them
FAULTS: dict[str, tuple[Callable[[Request], Any], int, float | None]] = {
    "429 retry-after seconds": (lambda q: r.error_reply(q, 429, "slow down", headers={"retry-after": "7"}), 0, None),
    "429 retry-after date": (lambda q: r.error_reply(q, 429, "slow down", headers={"retry-after": _date(-5)}), 0, None),
    "429 retry-after-ms": (lambda q: r.error_reply(q, 429, "slow down", headers={"retry-after-ms": "1500"}), 0, None),
    "429 then retried": (lambda q: r.error_reply(q, 429, "slow", headers={"retry-after": "0",
                                                                            "x-request-id": "req-1"}), 2, None),
    "500 json": (lambda q: r.error_reply(q, 500, "boom", code="server_error"), 1, None),
    "503 text": (lambda q: Reply(503, b"upstream unavailable", {"content-type": "text/plain"}), 0, None),
    "400 field refused": (lambda q: r.error_reply(q, 400, "top_logprobs is not supported", param="top_logprobs",
                                                  code="unsupported_parameter"), 2, None),
    "404 empty": (lambda q: Reply(404, b"", {}), 0, None),
    "connection reset": (lambda q: Reset(), 1, None),
    "timeout": (lambda q: Hang(2.0), 0, 0.3),
}


def _failure(client: Any, retries: int, budget_s: float | None) -> ProviderError:
    with pytest.raises(ProviderError) as info:
        send(client, Call("chat_completions", dict(BODY), CHAT_PATH), RetryPolicy(retries, 0.0, 0.0), Budget.of(budget_s))
    return info.value


def _seen(err: ProviderError) -> tuple[Any, ...]:
    """What a caller (the flows, faults.py, the gateway) reads of a ProviderError."""
    after = err.retry_after_s if err.retry_after_s is None else round(err.retry_after_s, 1)
    return (type(err), str(err), err.status_code, err.provider_message, err.body, err.request_id, err.n_retries,
            after, err.timed_out, err.code, err.status_hint)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_failure_is_the_same_typed_error_on_both_paths(fault: str) -> None:
    """429 (Retry-After in seconds, as an HTTP date, in ms), 5xx with JSON or text, a refused field, an empty 404, a
    reset connection and a timeout: the same ProviderError either way, after the same number of requests."""
    handler, retries, budget_s = FAULTS[fault]
    seen = []
    for pick in (0, 1):
        with Loopback(handler) as srv:
            seen.append((_seen(_failure(_clients(srv.base_url)[pick], retries, budget_s)), len(srv.log)))
    assert seen[0] == seen[1]
    if fault.startswith("429 retry-after"):
        assert seen[1][0][7] == {"seconds": 7.0, "date": 0.0, "retry-after-ms": 1.5}[fault.split()[-1]]
    assert seen[1][0][8] is (fault == "timeout")


def test_a_retried_429_then_a_reply_is_the_same_reply() -> None:
    """Retry-After honoured and retried by the one tenacity ``Retrying``: one retry, then the body, either way."""
    replies = []
    for pick in (0, 1):
        with Loopback(r.in_turn(lambda q: r.error_reply(q, 429, "slow", headers={"retry-after": "0"}),
                                json_reply(r.chat("A")))) as srv:
            reply = send(_clients(srv.base_url)[pick], Call("chat_completions", dict(BODY), CHAT_PATH),
                         RetryPolicy(2, 0.0, 0.0))
            replies.append((reply.body, reply.n_retries, [q.raw for q in srv.log]))
    assert replies[0] == replies[1] and replies[1][1] == 1


def test_the_async_direct_post_matches_too() -> None:
    """``AsyncOpenAI`` over its own ``AsyncClient``: the same bytes and the same 500 as the SDK's async post."""
    async def both(client: Any) -> tuple[Any, ...]:
        reply = await asend(client, Call("chat_completions", dict(BODY), CHAT_PATH), RetryPolicy(0, 0.0, 0.0))
        with pytest.raises(ProviderError) as info:
            await asend(client, Call("chat_completions", dict(BODY), CHAT_PATH), RetryPolicy(0, 0.0, 0.0))
        return reply.body, _seen(info.value)

    out = []
    for pick in (0, 1):
        with Loopback(r.in_turn(json_reply(r.chat("A")), lambda q: r.error_reply(q, 500, "boom"))) as srv:
            client = _clients(srv.base_url, openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient)[pick]
            out.append((*asyncio.run(both(client)), [q.raw for q in srv.log]))
    assert out[0] == out[1] and out[1][1][2] == 500


def test_local_server_clients_carry_their_http_client() -> None:
    """``LocalServer.client()`` / ``async_client()`` carry an HttpTarget over the SDK client's own HTTP client (kept
    by SDK copies); options only the SDK knows, and a user's own client marked by the server, keep the SDK's post."""
    srv = LocalServer("smollm2-135m", prompt_cache=False)
    srv.base_url = "http://127.0.0.1:9/v1"
    sync, aio = srv.client(timeout=5.0), srv.async_client()
    for client, is_async in ((sync, False), (aio, True)):
        target = Backend.of(client.with_options(max_retries=0)).http
        assert isinstance(target, HttpTarget) and target.is_async is is_async
        assert target.base_url == "http://127.0.0.1:9/v1/" and target.serves(client.with_options(timeout=1.0))
        assert not target.serves(client.with_options(base_url="http://127.0.0.1:10/v1"))
        assert Backend.of(client).name == srv.backend_name
    assert sync.timeout == 5.0
    assert Backend.of(srv.client(default_headers={"x-a": "b"})).http is None
    assert Backend.of(srv.mark(openai.OpenAI(base_url=srv.base_url, api_key="k"))).http is None
