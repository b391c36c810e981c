"""The LangChain gate and guard over the fault server: no signal and broken replies fail closed,
the guarded tool never runs, and a key the backend echoes never reaches an error or the agent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

pytest.importorskip("langchain_core", reason="the LangChain door runs in the openai 3.x pass")

from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

from jev_langchain import GateBlocked, JevGate, guard_tool  # noqa: E402
from jev_shared import JevError  # noqa: E402

from . import kinds as k
from .cells import ALL, TOKEN
from .conftest import engine
from .server import MARKER, Fault, FaultServer
from .test_wire import leaky_key

STATEMENT = f"{MARKER}: the message is a genuine customer question."
CALL = {"name": "wire_money", "args": {"amount": 5}, "id": "call_1", "type": "tool_call"}


def run(coro_or_value: Any) -> Any:
    return asyncio.run(coro_or_value) if asyncio.iscoroutine(coro_or_value) else coro_or_value


def _setup(server: FaultServer, fault: Fault, surface: str, sync: bool, **options: Any) -> Any:
    server.arm([fault], forever=True)
    return engine(server.url, surface, sync, max_retries=0, **options)


def _gate(client: Any, sync: bool, **kw: Any) -> Any:
    gate = JevGate(client, STATEMENT, **kw)
    return run(gate.invoke("Where is my refund?") if sync else gate.ainvoke("Where is my refund?"))


def _guarded(client: Any, sync: bool) -> tuple[Any, list[int]]:
    ran: list[int] = []

    @tool
    def wire_money(amount: int) -> str:
        """Send money to the user's account."""
        ran.append(amount)
        return "sent"

    guarded = guard_tool(wire_money, client, instructions=f"{MARKER}: this call should run.")
    return run(guarded.invoke(CALL) if sync else guarded.ainvoke(CALL)), ran


def _typed(cls: type) -> set[str]:
    """The names of ``cls`` and all its subclasses: what a failed decision may report itself as."""
    return {cls.__name__}.union(*(_typed(sub) for sub in cls.__subclasses__()))


MODES = [(s, sync) for s in TOKEN for sync in (True, False)]
ALL_MODES = [(s, sync) for s in ALL for sync in (True, False)]


def _ids(modes: list[tuple[str, bool]]) -> list[str]:
    return [f"{s}|{'sync' if sync else 'async'}" for s, sync in modes]


@pytest.mark.parametrize(("surface", "sync"), MODES, ids=_ids(MODES))
def test_no_label_window_blocks_the_gate_and_the_guard(fault_server: FaultServer, surface: str, sync: bool) -> None:
    client = _setup(fault_server, k.no_label, surface, sync, method="logprobs")
    with pytest.raises(GateBlocked) as info:
        _gate(client, sync)
    assert info.value.probability is None and fault_server.marked()
    out, ran = _guarded(client, sync)
    assert ran == [] and isinstance(out, ToolMessage) and out.status == "error"


@pytest.mark.parametrize(("surface", "sync"), ALL_MODES, ids=_ids(ALL_MODES))
@pytest.mark.parametrize("name", ["not_json", "html", "wrong_type_list"])
def test_a_malformed_200_follows_on_error(fault_server: FaultServer, surface: str, sync: bool, name: str) -> None:
    client = _setup(fault_server, k.MALFORMED[name], surface, sync)
    with pytest.raises(GateBlocked) as info:
        _gate(client, sync)
    assert info.value.error and info.value.error.split(":", 1)[0] in _typed(JevError)
    assert _gate(client, sync, on_error="allow") == "Where is my refund?"
    out, ran = _guarded(client, sync)
    assert ran == [] and isinstance(out, ToolMessage) and out.status == "error"


@pytest.mark.parametrize(("surface", "sync"), ALL_MODES, ids=_ids(ALL_MODES))
def test_an_echoed_key_reaches_neither_the_block_nor_the_agent(fault_server: FaultServer, surface: str,
                                                                sync: bool) -> None:
    key = leaky_key()
    fault_server.arm([k.error(401, f"Incorrect API key provided: {key}.")], forever=True)
    client = engine(fault_server.url, surface, sync, key=key, max_retries=0)
    with pytest.raises(GateBlocked) as info:
        _gate(client, sync)
    blocked = info.value
    assert blocked.error and "401" in blocked.error
    for text in (str(blocked), repr(blocked), blocked.error):
        assert key not in text and "leak" not in text
    out, ran = _guarded(client, sync)
    assert ran == [] and isinstance(out, ToolMessage)
    for text in (str(out.content), str(out.artifact)):
        assert key not in text and "leak" not in text
