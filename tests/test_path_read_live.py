"""Names that share their first tokens, read in the call that asks, on the embedded llama.cpp server (SmolLM2).

The path read (src/jev_shared/pathread.py) biases every name's tokens and lets the call write the name out at a
low temperature; the probabilities it reports are turned back to the model's own. Read with one continuation
call per shared token instead (the path read off), the same server gives the same distribution.
"""

from __future__ import annotations

import asyncio

import pytest

from jev_shared import AsyncSystemOneClient, Choice, SystemOneClient
from jev_shared import flows as flows_module

pytestmark = pytest.mark.live

#: banking77-style names: no shorter word tells them apart (``limits`` is a name too, and no description offers
#: one), so the names are the answer words;
#: in SmolLM2's tokenizer ``top_up_failed`` and ``top_up_limits`` share four tokens (``top``, ``_``, ``up``, ``_``).
NAMES = dict.fromkeys(["top_up_failed", "top_up_limits", "card_arrival", "card_not_working",
                       "cash_withdrawal_charge", "limits"], "")
STATE = "top up failed"


async def ask_async(local_server):
    client = AsyncSystemOneClient(local_server.async_client(), model=local_server.model, debias=False,
                                  calibrator=None)
    return await client.system_one(STATE, {"q": Choice(instructions="Which banking intent?", criteria=NAMES)})


def ask(local_server, debias: bool = False):
    client = SystemOneClient(local_server.client(), model=local_server.model, debias=debias, calibrator=None,
                             debug=True)
    return client.system_one(STATE, {"q": Choice(instructions="Which banking intent?", criteria=NAMES)})


@pytest.fixture
def own_server():
    """A server of this test's own, one slot, no kept prompts: both reads meet the same cache (a server other tests
    used holds other prompts, and a restored prefix moves its numbers by a few hundredths)."""
    from jev_shared.local import WIRE_MODEL, LocalServer

    with LocalServer(WIRE_MODEL, n_parallel=1, prompt_cache=False) as srv:
        yield srv


def test_the_path_read_gives_the_continuation_calls_distribution_in_one_call(own_server, monkeypatch):
    local_server = own_server
    resp = ask(local_server)
    debug = resp.debug["questions"]["q"]
    assert debug["readout"]["source"] == "logprobs:exact+continuation"
    first = debug["attempts"][0]["data"]
    assert first["max_tokens"] > 1 and len(first["logit_bias"]) > len(NAMES)
    assert resp.usage.n_calls == 1 and (resp.usage.output_tokens or 0) == first["max_tokens"]

    async_resp = asyncio.run(ask_async(local_server))  # the async driver runs the same flow: one call, same reading
    assert async_resp.usage.n_calls == 1 and async_resp.answers["q"].choice == resp.answers["q"].choice
    for name in NAMES:
        assert async_resp.answers["q"].probabilities[name] == pytest.approx(resp.answers["q"].probabilities[name],
                                                                           abs=0.02)

    monkeypatch.setattr(flows_module, "path_plan_for", lambda *a: None)  # each shared token read by a call
    called = ask(local_server)
    assert called.usage.n_calls >= 2
    got, want = resp.answers["q"].probabilities, called.answers["q"].probabilities
    assert resp.answers["q"].choice == called.answers["q"].choice
    for name in NAMES:
        assert got[name] == pytest.approx(want[name], abs=0.02), name
    assert abs(got["top_up_failed"] - got["top_up_limits"]) > 0.02  # read apart, not split evenly


def test_a_prefix_every_remaining_name_shares_is_prefilled_not_asked(local_server, monkeypatch):
    """With the path read off, "top_up_" costs one continuation call where the names part, not one per shared
    token: the server's tokenizer gives each token's text."""
    assert [t for _, t in local_server.pieces("top_up_failed")] == ["top", "_", "up", "_", "failed"]
    monkeypatch.setattr(flows_module, "path_plan_for", lambda *a: None)
    resp = ask(local_server)
    sent = [a["data"]["messages"][-1] for a in resp.debug["questions"]["q"]["attempts"] if a["kind"] == "request"]
    assert [m["content"] for m in sent if m["role"] == "assistant"] == ["top_up_"]
    assert resp.usage.n_calls == 2
