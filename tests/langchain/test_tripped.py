"""What LangChain users tripped over, each pinned by a test that failed before the fix."""

from __future__ import annotations

import json
from pathlib import Path

import openai
import pytest
from langchain_core.decisions import BaseDecisionModel, ChoiceAnswer, ClassifierResponse, NoulAnswer
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import ConfigurableField, RunnableLambda
from langchain_core.tools import ToolException, tool

from jev_langchain import GateDecision, GuardedTool, JevGate, JevRouter, ToolCallGuard, guard_tool
from jev_shared import Example, SystemOneClient

from .fakes import FIRST, SECOND, FakeOpenAI, ScriptedChatModel, fake_client

ROOT = Path(__file__).resolve().parents[2]  # the checkout, where pyproject.toml lists py.typed


def letters(fake: openai.OpenAI) -> SystemOneClient:
    return SystemOneClient(fake, model="fake", labels="letters")


def test_configurable_fields_rebuild_the_router():
    fake = FakeOpenAI(FIRST)
    router = JevRouter(letters(fake), {"a": ("A things", RunnableLambda(lambda x: "ran a")), "b": "B things"},
                       min_confidence=0.99).configurable_fields(min_confidence=ConfigurableField(id="mc"))
    assert router.with_config(configurable={"mc": 0.5}).invoke("x") == "ran a"  # 0.99 would raise: P(a) ~ 0.95
    assert len(fake.wire) == 1


def test_chat_openai_on_the_responses_api_is_a_backend():
    from langchain_openai import ChatOpenAI

    from tests.helpers import replies as r
    from tests.helpers.provider import http_client

    def respond(request):
        text = '{"noul": 0.9}' if request.get("text") else "yes"
        return r.responses([r.output_text(text)], usage=(5, 2))

    http = http_client(respond)
    llm = ChatOpenAI(model="gpt-4o-mini", use_responses_api=True, api_key="test-key", max_retries=0, http_client=http)
    assert JevGate(llm, "The message is polite.").decide("thanks!").probability == pytest.approx(0.9)
    assert http.wire.paths and set(http.wire.paths) == {"/v1/responses"}
    assert all("logprobs" not in b and "top_logprobs" not in b for b in http.wire.bodies)


def test_input_schema_keeps_the_branch_fields_so_as_tool_works():
    prompt = ChatPromptTemplate.from_template("answer {question}")
    router = JevRouter(fake_client(FIRST), {"a": ("A", prompt), "b": ("B", prompt)})
    assert "question" in router.get_input_schema().model_json_schema()["properties"]
    routed = router.as_tool(name="ask", description="Route a question")
    assert "question" in routed.args
    assert "answer where" in routed.invoke({"question": "where"}).to_string()


def test_two_tool_guard_middlewares_share_one_agent():
    agents = pytest.importorskip("langchain.agents")
    from jev_langchain import JevToolGuardMiddleware

    @tool
    def wire(amount: int) -> str:
        """Send money."""
        return "wired"

    @tool
    def delete(path: str) -> str:
        """Delete a file."""
        return "deleted"

    wire_fake, delete_fake = FakeOpenAI(SECOND), FakeOpenAI(FIRST)
    model = ScriptedChatModel(replies=[AIMessage("", tool_calls=[
        {"name": "wire", "args": {"amount": 5}, "id": "c1", "type": "tool_call"},
        {"name": "delete", "args": {"path": "/tmp/x"}, "id": "c2", "type": "tool_call"}]), AIMessage("done")])
    guards = [JevToolGuardMiddleware(letters(wire_fake), tool_names=["wire"]),
              JevToolGuardMiddleware(letters(delete_fake), tool_names=["delete"])]
    assert guards[0].name != guards[1].name and "wire" in guards[0].name
    out = agents.create_agent(model, [wire, delete], middleware=guards).invoke({"messages": [HumanMessage("go")]})
    by_id = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert by_id["c1"].status == "error" and by_id["c2"].content == "deleted"
    assert len(wire_fake.wire) == 1 and len(delete_fake.wire) == 1


@tool(response_format="content_and_artifact")
def drop_table(name: str) -> tuple[str, dict]:
    """Drop a database table."""
    if name == "missing":
        raise ToolException("no such table")
    return f"dropped {name}", {"rows": 3}


drop_table.handle_tool_error = True
drop_table.tags = ["danger"]
drop_table.metadata = {"owner": "ops"}


def test_guard_tool_passes_criteria_n_messages_examples_and_copies_the_tool():
    fake = FakeOpenAI(FIRST)
    guarded = guard_tool(drop_table, letters(fake), criteria={"true": "CRITERION-YES"}, n_messages=1,
                         examples=[Example(state="drop temp", answer=True)],
                         conversation=lambda: [HumanMessage("OLD-TURN"), HumanMessage("NEW-TURN")])
    assert guarded.response_format == "content_and_artifact" and guarded.tags == ["danger"]
    assert guarded.metadata == {"owner": "ops"} and guarded.handle_tool_error is True
    msg = guarded.invoke({"type": "tool_call", "name": "drop_table", "args": {"name": "t1"}, "id": "c1"})
    assert msg.content == "dropped t1" and msg.artifact == {"rows": 3}
    prompt = json.dumps(fake.wire[0]["messages"])
    assert "CRITERION-YES" in prompt and "drop temp" in prompt and "NEW-TURN" in prompt and "OLD-TURN" not in prompt
    assert guarded.invoke({"name": "t2"}) == "dropped t2"
    failed = guarded.invoke({"type": "tool_call", "name": "drop_table", "args": {"name": "missing"}, "id": "c2"})
    assert failed.status == "error" and "no such table" in failed.content


def test_guarded_tool_takes_name_and_description_from_the_tool():
    guarded = GuardedTool(tool=drop_table, guard=ToolCallGuard(fake_client(SECOND)))
    assert guarded.name == "drop_table" and guarded.description == drop_table.description
    blocked = guarded.invoke({"type": "tool_call", "name": "drop_table", "args": {"name": "t"}, "id": "c9"})
    assert blocked.status == "error" and "blocked" in blocked.content


def test_a_classifier_router_is_a_langgraph_conditional_edge():
    from typing import TypedDict

    from langgraph.graph import END, START, StateGraph

    class State(TypedDict):
        text: str
        handled_by: str

    router = JevRouter(fake_client(SECOND), {"billing": "Money", "tech": "Bugs"}, state=lambda s: s["text"])
    graph = StateGraph(State)
    graph.add_node("billing", lambda s: {"handled_by": "billing"})
    graph.add_node("tech", lambda s: {"handled_by": "tech"})
    graph.add_conditional_edges(START, router.as_edge(), list(router.routes))
    graph.add_edge("billing", END)
    graph.add_edge("tech", END)
    assert graph.compile().invoke({"text": "the app crashes"})["handled_by"] == "tech"


def test_gate_decide_returns_a_decision():
    decision = JevGate(fake_client(FIRST), "It is fine.").decide("x")
    assert isinstance(decision, GateDecision) and decision.allowed and decision.probability > 0.9


@pytest.mark.parametrize("package", ["jev_shared", "jev_langchain", "jev_llamaindex"])
def test_every_package_is_marked_typed(package):
    import importlib.util

    spec = importlib.util.find_spec(package)  # where it is installed, without importing it
    assert spec is not None and spec.submodule_search_locations
    assert (Path(spec.submodule_search_locations[0]) / "py.typed").is_file()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()


class Fixed(BaseDecisionModel):
    """Another provider's decision model (a real BaseDecisionModel) with fixed answers; records its requests.

    Kept as a double on purpose: the test is that our doors take *any* BaseDecisionModel, not ours, so
    it must be one no provider SDK sits under."""

    model: str = "fixed"
    seen: list = []

    @property
    def _provider(self) -> str:
        return "other"

    def _classify(self, state, questions):
        self.seen.append({"state": state, "questions": questions})
        answers = {qid: NoulAnswer(type="noul", noul=0.1) if q.type == "noul" else
                   ChoiceAnswer(type="choice", choice=list(q.criteria)[-1],
                                probabilities=dict.fromkeys(q.criteria, 1 / len(q.criteria)), confidence=0.9)
                   for qid, q in questions.items()}
        return ClassifierResponse(model=self.model, answers=answers, usage={"input_tokens": 3, "output_tokens": 1})


def test_our_doors_take_any_decision_model():
    other = Fixed(seen=[])
    decision = JevRouter(other, {"billing": "Money", "tech": "Bugs"}).decide("the app crashes")
    assert decision.route == "tech" and decision.method == "decision_model" and decision.confidence == 0.9
    with pytest.raises(Exception, match="P\\(true\\) = 0.100"):
        JevGate(other, "It is fine.").invoke("x")
    assert not ToolCallGuard(other).check("rm", {"path": "/"}).allowed
    assert other.seen[0]["state"] == "the app crashes" and other.seen[2]["state"]["tool"] == "rm"
    assert set(other.seen[0]["questions"]["route"].criteria) == {"billing", "tech"}
