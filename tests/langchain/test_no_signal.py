"""A readout with no label in its window must close the gate and the guard.

The window holds only tokens that are not labels (``Sure``, `` I``, ``The``): the engine reads the
uniform distribution, P(true) = 0.5, which meets the default threshold. That stand-in is not
evidence, so the gate blocks, the guarded tool does not run, and the router does not guess.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool

from jev_langchain import GateBlocked, JevGate, JevRouter, RouteConfidenceError, guard_tool

from .fakes import fake_async_client, fake_client

NO_LABEL = {"Sure": -0.2, " I": -1.5, "The": -2.0}


def test_the_gate_blocks_on_no_signal_sync_and_async():
    gate = JevGate(fake_client(NO_LABEL), "The message is a genuine question.")
    with pytest.raises(GateBlocked, match="no signal") as info:
        gate.invoke("hello")
    assert info.value.probability is None
    agate = JevGate(fake_async_client(NO_LABEL), "The message is a genuine question.")
    import asyncio

    with pytest.raises(GateBlocked):
        asyncio.run(agate.ainvoke("hello"))


def test_the_gate_on_error_allow_still_means_allow():
    gate = JevGate(fake_client(NO_LABEL), "The message is a genuine question.", on_error="allow")
    assert gate.invoke("hello") == "hello"


def test_the_guarded_tool_does_not_run_on_no_signal():
    ran = []

    @tool
    def wire_money(amount: int) -> str:
        """Send money."""
        ran.append(amount)
        return "sent"

    guarded = guard_tool(wire_money, fake_client(NO_LABEL))
    out = guarded.invoke({"type": "tool_call", "name": "wire_money", "args": {"amount": 5}, "id": "c1"})
    assert ran == []
    assert isinstance(out, ToolMessage) and out.status == "error"
    assert "could not decide (LabelReadoutError)" in out.content


def test_the_router_does_not_guess_on_no_signal():
    routes = {"billing": "Invoices", "technical": "Bugs"}
    with pytest.raises(RouteConfidenceError, match="no signal"):
        JevRouter(fake_client(NO_LABEL), routes, "Which team?").decide("hi")
    decision = JevRouter(fake_client(NO_LABEL), routes, "Which team?", default="technical").decide("hi")
    assert decision.route == "technical" and decision.defaulted


def test_an_echoed_key_reaches_neither_the_gate_error_nor_the_agent():
    from jev_shared import SystemOneClient
    from tests.helpers import fails, provider

    key = "".join(["live", "_", "k" * 12, "7"])  # not sk-shaped: redacted because it is the client's own key
    # a 401 from a proxy that echoes the caller's key in its message
    echoes = provider(fails(401, f"Incorrect API key provided: {key}", code="invalid_api_key"), key=key)
    client = SystemOneClient(echoes, model="m", api="chat_completions")
    with pytest.raises(GateBlocked) as info:
        JevGate(client, "The message is fine.").invoke("hi")
    assert key not in str(info.value) and key not in (info.value.error or "")
    assert "[REDACTED]" in info.value.error

    @tool
    def delete_all() -> str:
        """Delete everything."""
        return "deleted"

    out = guard_tool(delete_all, client).invoke({"type": "tool_call", "name": "delete_all", "args": {}, "id": "c2"})
    assert key not in out.content and "Incorrect API key" not in out.content  # a short, safe message
