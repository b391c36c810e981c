"""A call's total timeout is a deadline on every path: the first call of a process too, whose planning asks the
server's tokenizer (a vLLM or SGLang backend, the embedded model) before any decision request; a timeout too
large for the platform's clocks is a typed error, not an OverflowError; and an async call that times out leaves
no task whose exception asyncio reports as never retrieved. A loopback backend and the real openai SDK."""

from __future__ import annotations

import asyncio
import gc
import json
import time

import httpx
import openai
import pytest

from jev_shared import AsyncSystemOneClient, Choice, DecisionTimeoutError, InvalidQuestionError, Noul, SystemOneClient
from tests.helpers.replies import chat, window
from tests.hostile.fast_stub import FastStub

pytestmark = pytest.mark.timeout(60)
YES = chat("Yes", {"content": window({"Yes": -0.1, "No": -2.5})}, "length")
#: One body for every POST: a chat completion, and (its "tokens") a /tokenize answer.
SLOW_SERVER = {**YES, "tokens": [7]}
QUESTIONS = {
    "one choice": {"team": Choice(instructions="Which team?", criteria={"billing": "pay", "tech": "bugs"})},
    "two nouls": {"spam": Noul(instructions="This is spam."), "rude": Noul(instructions="This is rude.")},
}


@pytest.mark.parametrize("asked", sorted(QUESTIONS))
def test_the_first_call_ends_by_its_deadline_while_the_tokenizer_is_slow(asked):
    """Was: the answer after 1.7-3.5 s, the tokenizer's requests (1.5 s each) run before the deadline started."""
    with FastStub(SLOW_SERVER, delay_s=1.5) as stub:
        sdk = openai.OpenAI(base_url=stub.base_url, api_key="k", max_retries=0)
        client = SystemOneClient(sdk, model="m", api="vllm", max_retries=0)
        for _ in range(2):  # the first call of the process, and the next
            started = time.perf_counter()
            with pytest.raises(DecisionTimeoutError):
                client.system_one("x", QUESTIONS[asked], timeout=0.5)
            assert time.perf_counter() - started < 1.2
        sdk.close()


@pytest.mark.parametrize("timeout", [1e10, 1e300, 2_000_000])
def test_a_timeout_past_the_clocks_is_a_typed_error(timeout):
    """Was: OverflowError (timestamp out of range for platform time_t) out of the sync client's wait."""
    with FastStub(YES) as stub:
        sync = SystemOneClient(openai.OpenAI(base_url=stub.base_url, api_key="k"), model="m", api="chat_completions")
        with pytest.raises(InvalidQuestionError, match="timeout") as err:
            sync.system_one("x", QUESTIONS["two nouls"], timeout=timeout)
        assert err.value.field == "timeout"
        assert sync.system_one("x", QUESTIONS["two nouls"], timeout=1_000_000).answers["spam"].noul > 0.5

        async def asynchronous() -> None:
            client = AsyncSystemOneClient(openai.AsyncOpenAI(base_url=stub.base_url, api_key="k"), model="m",
                                          api="chat_completions")
            with pytest.raises(InvalidQuestionError, match="timeout"):
                await client.system_one("x", QUESTIONS["two nouls"], timeout=timeout)

        asyncio.run(asynchronous())


class _OneFailsOneIsSlow(httpx.AsyncBaseTransport):
    """The question that says "fails" gets a 400 at once; any other waits a second."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "fails" in json.dumps(json.loads(request.content)):
            return httpx.Response(400, json={"error": {"message": "refused"}})
        await asyncio.sleep(1.0)
        return httpx.Response(200, json=YES)


def test_a_timed_out_call_leaves_no_exception_unread():
    """Was: "Task exception was never retrieved" for a question that failed before the deadline its call then hit."""
    reported: list[dict] = []

    async def main() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: reported.append(context))
        http = httpx.AsyncClient(transport=_OneFailsOneIsSlow())
        sdk = openai.AsyncOpenAI(base_url="http://provider.test/v1", api_key="k", max_retries=0, http_client=http)
        client = AsyncSystemOneClient(sdk, model="m", api="chat_completions", method="logprobs", max_retries=0)
        questions = {"bad": Noul(instructions="this fails"), "slow": Noul(instructions="this is slow")}
        for _ in range(5):
            with pytest.raises(DecisionTimeoutError):
                await client.system_one("x", questions, timeout=0.3)
        await asyncio.sleep(1.2)  # the abandoned requests unwind
        gc.collect()
        await asyncio.sleep(0)
        await sdk.close()

    asyncio.run(main())
    engines = [c for c in reported if "jev_shared" in _origin(c)]  # the engine's own tasks; a library's are its own
    assert engines == [], [(c.get("message"), _origin(c)) for c in reported]


def _origin(context: dict) -> str:
    """Where a reported task's coroutine was written (its code's file), or the context's repr."""
    task = context.get("task") or context.get("future")
    coro = task.get_coro() if isinstance(task, asyncio.Task) else None
    code = getattr(coro, "cr_code", None)
    return code.co_filename if code is not None else repr(context)
