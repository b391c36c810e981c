"""Misuse is caught at construction, with an error that names what is wrong."""

from __future__ import annotations

import pytest
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

from jev_langchain import JevGate, JevRouter, ToolCallGuard, guard_tool
from jev_langchain.chat_model import ChatModelClient
from jev_shared import Example

from .fakes import FIRST, FakeOpenAI, fake_client

BRANCH = RunnableLambda(lambda x: x)


@pytest.mark.parametrize(
    ("routes", "error", "match"),
    [
        ({}, ValueError, "at least one route"),
        ([], ValueError, "at least one route"),
        ("billing", TypeError, "expected a mapping"),
        ({"": ("Empty name", BRANCH)}, ValueError, "non-empty strings"),
        ({"  ": "Blank name"}, ValueError, "non-empty strings"),
        ({"billing": "Invoices", "billing ": "Also invoices"}, ValueError, "duplicate route name 'billing'"),
        ([("a", "A"), ("a", "Again")], ValueError, "duplicate route name 'a'"),
        ({"a": ("A", 42)}, TypeError, r"routes\['a'\]: the branch must be a Runnable or a callable, got int"),
        ({"a": ("A", BRANCH, "extra")}, TypeError, r"routes\['a'\]"),
        ({"a": ("", BRANCH)}, ValueError, "description must be a non-empty string"),
        ({"a": None}, TypeError, r"routes\['a'\]"),
        ([("a",)], TypeError, "each item must be"),
        ({f"r{i}": "x" for i in range(256)}, ValueError, "at most 255"),
    ],
)
def test_router_rejects_bad_routes(routes, error, match):
    with pytest.raises(error, match=match):
        JevRouter(fake_client(), routes)


@pytest.mark.parametrize("value", [-0.1, 1.5, "0.5", True])
def test_router_rejects_a_threshold_outside_0_1(value):
    with pytest.raises(ValueError, match="min_confidence: must be a number in \\[0, 1\\]"):
        JevRouter(fake_client(), {"a": "A", "b": "B"}, min_confidence=value)


def test_router_rejects_other_misuse():
    routes = {"a": "A", "b": "B"}
    with pytest.raises(ValueError, match="default: 'c' is not one of the routes"):
        JevRouter(fake_client(), routes, default="c")
    with pytest.raises(ValueError, match="instructions"):
        JevRouter(fake_client(), routes, "  ")
    with pytest.raises(TypeError, match="state: expected a callable"):
        JevRouter(fake_client(), routes, state="body")
    with pytest.raises(ValueError, match=r"examples\[0\].answer: 'c' is not one of the routes"):
        JevRouter(fake_client(), routes, examples=[Example(state="x", answer="c")])
    with pytest.raises(TypeError, match="client must be a SystemOneClient.*got OpenAI"):
        JevRouter(FakeOpenAI(FIRST), routes)


def test_gate_rejects_misuse():
    with pytest.raises(ValueError, match="threshold: must be a number in \\[0, 1\\]"):
        JevGate(fake_client(), "ok", threshold=2)
    with pytest.raises(ValueError, match="on_error: must be one of"):
        JevGate(fake_client(), "ok", on_error="ignore")
    with pytest.raises(ValueError, match="on_block: must be one of"):
        JevGate(fake_client(), "ok", on_block="drop")
    with pytest.raises(TypeError, match="on_block: expected 'raise' or a Runnable"):
        JevGate(fake_client(), "ok", on_block=3)
    with pytest.raises(ValueError, match="instructions"):
        JevGate(fake_client(), "")
    with pytest.raises(TypeError, match="client must be"):
        JevGate(None, "ok")
    with pytest.raises(ValueError, match=r"examples\[1\].answer: a yes/no example answers True or False"):
        JevGate(fake_client(), "ok", examples=[Example(state="a", answer=True), Example(state="b", answer="maybe")])


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def test_guard_rejects_misuse():
    with pytest.raises(ValueError, match="threshold"):
        ToolCallGuard(fake_client(), threshold=-1)
    with pytest.raises(ValueError, match="on_block: must be one of"):
        ToolCallGuard(fake_client(), on_block="silent")
    with pytest.raises(ValueError, match="block_message: only {tool} and {reason}"):
        ToolCallGuard(fake_client(), block_message="no {user}")
    with pytest.raises(ValueError, match="criteria: a yes/no question takes only 'true' and 'false'"):
        ToolCallGuard(fake_client(), criteria={"yes": "fine"})
    with pytest.raises(ValueError, match="n_messages"):
        ToolCallGuard(fake_client(), n_messages=-1)
    with pytest.raises(TypeError, match="tool: expected a LangChain BaseTool"):
        guard_tool(lambda path: path, fake_client())
    with pytest.raises(ValueError, match="either client"):
        guard_tool(delete_file)
    with pytest.raises(ValueError, match="either client"):
        guard_tool(delete_file, fake_client(), guard=ToolCallGuard(fake_client()))


def test_chat_model_client_rejects_a_non_chat_model():
    with pytest.raises(TypeError, match="expected a LangChain chat model"):
        ChatModelClient(FakeOpenAI(FIRST))
