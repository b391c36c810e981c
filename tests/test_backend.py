"""Backend: one typed value for what the engine knows about a backend, kept by SDK copies."""

from __future__ import annotations

import openai

from jev_shared import Choice, SystemOneClient
from jev_shared.backend import Backend, attach
from jev_shared.memory import backend_fingerprint
from tests.helpers import provider
from tests.helpers import replies as r

TEAM = Choice(instructions="Which team?", criteria={"billing": "money", "sales": "buying"})


def test_an_sdk_copy_keeps_its_backend() -> None:
    """with_options() and copy() build a new client: the value attached to the original still describes them
    (the gateway's per-timeout copies were re-marked by hand before)."""
    backend = Backend(name="embedded-llama.cpp:m", surfaces=("chat_completions",), exact_readout=True)
    sdk = attach(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k"), backend)
    for copy in (sdk.with_options(timeout=3.0), sdk.copy(max_retries=0), sdk.with_options(max_retries=0)):
        assert Backend.of(copy) is backend
        assert backend_fingerprint(copy) == backend_fingerprint(sdk) == backend.fingerprint(copy)
    other = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k")
    assert Backend.of(other) == Backend() and backend_fingerprint(other) != backend_fingerprint(sdk)


def test_backend_keyword_decides_the_surfaces_without_discovery() -> None:
    """backend= on the client: a Responses-capable SDK told it speaks Chat Completions asks no Responses route."""
    sdk = provider(r.windows({"billing": -0.1, "sales": -2.0}), surfaces=None)
    client = SystemOneClient(sdk, model="m", backend=Backend(surfaces=("chat_completions",)), debias=False)
    resp = client.system_one("my invoice", {"team": TEAM})
    assert resp.answers["team"].choice == "billing" and resp.debug["apis"] == {"team": "chat_completions"}
    assert sdk.wire.paths == ["/v1/chat/completions"] and client.backend.surfaces == ("chat_completions",)
