"""guard_tool and ToolCallGuard: a blocked call never runs the tool."""

from __future__ import annotations

import asyncio
import json

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from jev_langchain import GuardedTool, ToolCallBlocked, ToolCallGuard, guard_tool
from jev_shared import SystemOneClient

from .fakes import FIRST, SECOND, FakeOpenAI, fake_async_client, fake_client

DELETED: list[str] = []


@tool
def delete_file(path: str, force: bool = False) -> str:
    """Delete the file at ``path``."""
    DELETED.append(path)
    return f"deleted {path}"


@tool(response_format="content_and_artifact")
def read_file(path: str) -> tuple[str, dict]:
    """Read the file at ``path``."""
    return f"contents of {path}", {"bytes": 12}


@pytest.fixture(autouse=True)
def clear_deleted():
    DELETED.clear()


def call(name: str = "delete_file", **args) -> dict:
    return {"type": "tool_call", "name": name, "args": args or {"path": "/etc/passwd"}, "id": "call-1"}


def test_guarded_tool_keeps_name_description_and_schema():
    guarded = guard_tool(delete_file, fake_client())
    assert isinstance(guarded, GuardedTool)
    assert guarded.name == "delete_file" and guarded.description == delete_file.description
    assert guarded.args_schema is delete_file.args_schema
    assert guarded.tool_call_schema.model_json_schema() == delete_file.tool_call_schema.model_json_schema()


def test_allowed_call_runs_the_tool_with_its_arguments():
    guarded = guard_tool(delete_file, fake_client(FIRST))
    assert guarded.invoke({"path": "/tmp/x", "force": True}) == "deleted /tmp/x"
    assert DELETED == ["/tmp/x"]
    msg = guarded.invoke(call(path="/tmp/y"))
    assert isinstance(msg, ToolMessage) and msg.content == "deleted /tmp/y" and msg.tool_call_id == "call-1"


def test_blocked_call_never_runs_the_tool_and_says_so():
    guarded = guard_tool(delete_file, fake_client(SECOND))
    text = guarded.invoke({"path": "/etc/passwd"})
    assert "blocked" in text and "delete_file" in text and "did not run" in text
    msg = guarded.invoke(call())
    assert isinstance(msg, ToolMessage) and msg.status == "error" and msg.tool_call_id == "call-1"
    assert msg.artifact["jev_guard"]["allowed"] is False and msg.artifact["jev_guard"]["probability"] < 0.5
    assert DELETED == []


def test_on_block_raise_stops_without_running_the_tool():
    guarded = guard_tool(delete_file, fake_client(SECOND), on_block="raise")
    with pytest.raises(ToolCallBlocked, match="'delete_file' was blocked") as info:
        guarded.invoke(call())
    assert info.value.tool == "delete_file" and info.value.arguments == {"path": "/etc/passwd", "force": False}
    assert info.value.probability < 0.5 and DELETED == []


def test_a_failed_decision_blocks_by_default():
    fake = FakeOpenAI(FIRST, fail=True)
    text = guard_tool(delete_file, SystemOneClient(fake, model="fake", labels="letters")).invoke({"path": "/a"})
    assert "could not decide" in text and DELETED == [] and len(fake.wire) == 1
    assert guard_tool(delete_file, fake_client(fail=True), on_error="allow").invoke({"path": "/b"}) == "deleted /b"


def test_the_guard_sees_the_tool_the_arguments_and_the_conversation():
    fake = FakeOpenAI(FIRST)
    history = [HumanMessage("please clean up my temp folder")]
    guard_tool(delete_file, SystemOneClient(fake, model="fake", labels="letters"), conversation=lambda: history).invoke(
        {"path": "/tmp/cache"})
    prompt = json.dumps(fake.wire[0]["messages"])
    assert "delete_file" in prompt and "/tmp/cache" in prompt and "please clean up my temp folder" in prompt


def test_artifacts_of_the_wrapped_tool_survive():
    msg = guard_tool(read_file, fake_client(FIRST)).invoke(call("read_file", path="/a"))
    assert msg.content == "contents of /a" and msg.artifact == {"bytes": 12}


def test_the_decision_log_is_in_the_trace(recorder):
    guard_tool(delete_file, fake_client(SECOND)).invoke(call(), {"callbacks": [recorder]})
    outer = [r for r in recorder.runs if r["kind"] == "tool" and r["name"] == "delete_file"]
    assert len(outer) == 1  # the wrapped tool never started
    decide = recorder.one("jev_guard")
    assert decide["parent"] == outer[0]["id"] and "jev:decide" in decide["tags"]
    [event] = recorder.events
    assert event["name"] == "jev_guard" and event["data"]["allowed"] is False
    assert event["data"]["tool"] == "delete_file" and event["data"]["arguments"] == {"path": "/etc/passwd", "force": False}


def test_allowed_call_nests_the_wrapped_tool_run(recorder):
    guard_tool(delete_file, fake_client(FIRST)).invoke(call(), {"callbacks": [recorder]})
    outer, inner = [r for r in recorder.runs if r["kind"] == "tool"]
    assert inner["parent"] == outer["id"] and "guard:allowed" in inner["tags"]
    assert DELETED == ["/etc/passwd"]


def test_async_guarded_tool_both_ways():
    async def run():
        allowed = await guard_tool(delete_file, fake_async_client(FIRST)).ainvoke(call(path="/ok"))
        blocked = await guard_tool(delete_file, fake_async_client(SECOND)).ainvoke(call(path="/no"))
        return allowed, blocked

    allowed, blocked = asyncio.run(run())
    assert allowed.content == "deleted /ok" and blocked.status == "error"
    assert DELETED == ["/ok"]


def test_one_guard_checks_calls_directly():
    guard = ToolCallGuard(fake_client(FIRST), threshold=0.9)
    decision = guard.check("delete_file", {"path": "/a"})
    assert decision.allowed and decision.probability > 0.9 and decision.tool == "delete_file"
    assert not ToolCallGuard(fake_client(FIRST), threshold=0.99).check("delete_file", {"path": "/a"}).allowed


@pytest.mark.live
def test_live_guard_decides_and_the_tool_runs_only_when_allowed(local_client):
    guarded = guard_tool(delete_file, local_client, threshold=0.5)
    msg = guarded.invoke(call(path="/home/me/notes.txt"))
    decision = ToolCallGuard(local_client).check("delete_file", {"path": "/home/me/notes.txt"})
    assert 0.0 <= decision.probability <= 1.0
    if msg.status == "error":
        assert DELETED == [] and msg.artifact["jev_guard"]["probability"] < 0.5
    else:
        assert DELETED == ["/home/me/notes.txt"]
