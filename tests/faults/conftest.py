"""Fixtures: a fresh fault server per test, engine clients on the real SDKs, one event loop for async."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import openai
import pytest

from jev_shared import AsyncSystemOneClient, Choice, Noul, SystemOneClient

from .replies import good
from .server import MARKER, FaultServer

STATE = "I was charged twice for my subscription this month."
#: The faulty question carries the marker; "ok" is answered well, so a partial answer would show.
FAULTY = Choice(instructions=f"{MARKER}: which team should take this ticket?",
                criteria={"billing": "payments, invoices", "technical": "bugs, outages", "sales": "new plans"})
FINE = Noul(instructions="The ticket is about money.")


def questions() -> dict[str, Any]:
    return {"q": FAULTY, "ok": FINE}


def api_key() -> str:
    """Built at run time: no key-shaped literal in the source."""
    return "test-" + "k" * 8


def sdk_client(url: str, surface: str, sync: bool, key: str | None = None) -> Any:
    """The real SDK client a user would build, pointed at the loopback server."""
    key = key or api_key()
    if surface == "messages":
        cls = anthropic.Anthropic if sync else anthropic.AsyncAnthropic
        return cls(base_url=url, api_key=key, max_retries=0)
    cls = openai.OpenAI if sync else openai.AsyncOpenAI
    return cls(base_url=url + "/v1", api_key=key, max_retries=0)


def engine(url: str, surface: str, sync: bool, *, key: str | None = None, **options: Any) -> Any:
    """A SystemOneClient (or its async twin) with no backoff waits, so the matrix stays fast."""
    cls = SystemOneClient if sync else AsyncSystemOneClient
    client = cls(sdk_client(url, surface, sync, key), model="fault-model", api=surface, **options)
    policy = getattr(client, "retry_policy", None)
    if dataclasses.is_dataclass(policy):  # waits of 0 s: retries are counted on the wire, not timed
        fields = {f.name for f in dataclasses.fields(policy)}
        client.retry_policy = dataclasses.replace(policy, **{n: 0.0 for n in ("initial_s", "max_s") if n in fields})
    return client


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    with FaultServer(good) as srv:
        yield srv


@pytest.fixture
def ask() -> Iterator[Callable[..., Any]]:
    """``ask(client, state, questions, **kw)``: sync clients directly, async ones on one loop per test."""
    loop = asyncio.new_event_loop()

    def run(client: Any, state: Any, qs: Any, **kw: Any) -> Any:
        if isinstance(client, AsyncSystemOneClient):
            return loop.run_until_complete(client.system_one(state, qs, **kw))
        return client.system_one(state, qs, **kw)

    yield run
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()
