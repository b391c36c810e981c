"""ClientPair: what every integration uses to reach the engine, sync or async."""

from __future__ import annotations

import asyncio

import pytest

from jev_shared import AsyncSystemOneClient, ClientCapabilityError, ClientPair, Noul, SystemOneClient
from tests.helpers import aprovider

from .test_reliability import Scripted, reply

SPAM = {"spam": Noul(instructions="This is spam.")}


def test_an_async_caller_with_a_sync_client_runs_it_on_a_thread():
    fake = Scripted(reply([("yes", -0.1), ("no", -3.0)]))
    pair = ClientPair.of(SystemOneClient(fake, model="m"), "test")
    assert pair is not None and pair.method == "auto" and pair.max_concurrency == 8 and pair.model == "m"
    resp = asyncio.run(pair.aask("buy now", SPAM))
    assert resp.answers["spam"].noul > 0.9 and len(fake.wire) == 1


def test_a_sync_caller_with_only_an_async_client_is_told_what_to_do():
    fake = aprovider(reply([("yes", -0.1), ("no", -4.0)]))
    pair = ClientPair.of(AsyncSystemOneClient(fake, model="m"), "JevGate")
    with pytest.raises(ClientCapabilityError, match="JevGate has only an async client"):
        pair.ask("x", SPAM)
    assert fake.wire == []  # told before any request
    assert asyncio.run(pair.aask("x", SPAM)).answers["spam"].noul > 0.9


def test_anything_else_is_not_a_pair():
    assert ClientPair.of(object()) is None
    with pytest.raises(ClientCapabilityError):
        ClientPair(owner="x")
