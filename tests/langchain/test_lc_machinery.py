"""The components under LangChain's own machinery: dumpd/load, pickle, wrapped chat models, LangGraph edges.

The chat models here answer by JSON (``ScriptedChatModel``: no logprobs), so every decision is known;
``ChatOpenAI`` is only built, never called (no network).
"""

from __future__ import annotations

import json
import pickle
import warnings
from typing import Any, TypedDict

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumpd, dumps, loads
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import ConfigurableField, RunnableLambda

from jev_langchain import JevDecisionModel, JevGate, JevRouter, RouteDecision, ToolCallGuard, guard_tool
from jev_langchain.chat_model import ChatModelClient

from .fakes import FIRST, ScriptedChatModel, fake_client

KEY = "test-" + "k" * 12  # built at run time: no key-shaped literal in the source
ROUTES = {"billing": "Invoices, refunds and payments", "tech": "Bugs, errors and outages"}


def chat_openai(**kw: Any) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(api_key=KEY, model="m", base_url="http://127.0.0.1:9/v1", logprobs=True, **kw)


def json_model(answer: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel(replies=[AIMessage(json.dumps(answer))])


class Broken(BaseChatModel):
    """A chat model whose first ``failures`` calls raise (a provider outage), then answers ``reply``."""

    reply: str
    failures: int = 1000
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "broken"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls += 1
        if self.calls <= self.failures:
            raise ConnectionError("the provider is down")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self.reply))])


TECH = {"probabilities": {"billing": 0.1, "tech": 0.9}}


def components(client: Any) -> list[Any]:
    return [JevRouter(client, ROUTES, examples=[{"state": "charged twice", "answer": "billing"}]),
            JevGate(client, "The message is a genuine question.", threshold=0.3),
            JevDecisionModel(client)]


# -- dumpd / dumps / loads --------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [lambda c: c, lambda c: c.with_retry(), lambda c: c.with_fallbacks([c]),
                                  lambda c: c.configurable_fields(temperature=ConfigurableField(id="t"))],
                         ids=["model", "with_retry", "with_fallbacks", "configurable_fields"])
def test_dumpd_gives_a_constructor_with_the_key_as_a_secret_id(make):
    for component in components(make(chat_openai())):
        dumped = dumpd(component)
        assert dumped["type"] == "constructor", dumped
        assert dumped["id"] == ["jev_langchain", type(component).__name__]
        assert dumped["kwargs"]["client"]["type"] == "constructor"
        assert KEY not in dumps(component)
        assert '"type": "secret", "id": ["OPENAI_API_KEY"]' in dumps(component)


def test_a_dump_loads_back_into_a_working_component():
    from langchain_openai import ChatOpenAI

    router, gate, model = components(chat_openai())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # loads is in beta
        loaded = [loads(dumps(c), secrets_map={"OPENAI_API_KEY": KEY}, valid_namespaces=["jev_langchain"],
                        allowed_objects=[JevRouter, JevGate, JevDecisionModel, ChatOpenAI])
                  for c in (router, gate, model)]
    r2, g2, m2 = loaded
    assert list(r2.routes) == list(ROUTES) and r2.routes["tech"].description == ROUTES["tech"]
    assert r2.examples == router.examples and r2.question == router.question
    assert g2.threshold == 0.3 and g2.question == gate.question
    assert m2.model == "m"
    for c in loaded:
        assert c.client.openai_api_key.get_secret_value() == KEY and c.client.logprobs is True


def test_an_engine_client_is_dumped_as_not_implemented_but_the_component_is_not():
    import openai

    from jev_shared import SystemOneClient

    dumped = dumpd(JevRouter(fake_client(FIRST), ROUTES))
    assert dumped["type"] == "constructor" and dumped["kwargs"]["client"]["type"] == "not_implemented"
    assert dumped["kwargs"]["routes"] == ROUTES
    keyed = SystemOneClient(openai.OpenAI(api_key=KEY, base_url="http://127.0.0.1:9/v1"), model="m")
    assert KEY not in dumps(JevRouter(keyed, ROUTES))   # its repr names the class, never the key


# -- pickle -----------------------------------------------------------------------------------------------

def answer_by_name(text: str) -> str:
    return f"handled: {text}"


def test_a_pickled_router_and_gate_decide_again():
    router = JevRouter(json_model(TECH), {"billing": (ROUTES["billing"], answer_by_name), "tech": ROUTES["tech"]})
    gate = JevGate(json_model({"noul": 0.9}), "The message is a genuine question.")
    router2, gate2 = pickle.loads(pickle.dumps(router)), pickle.loads(pickle.dumps(gate))
    decision = router2.invoke("The app crashes on start")
    assert isinstance(decision, RouteDecision) and decision.route == "tech"
    assert gate2.invoke("How do I reset my password?") == "How do I reset my password?"


def test_pickle_rebuilds_a_chat_model_that_holds_sdk_clients():
    for make in (lambda c: c, lambda c: c.with_retry(stop_after_attempt=2), lambda c: c.with_fallbacks([c])):
        client = make(chat_openai(top_logprobs=5))
        for component in components(client) + [ToolCallGuard(client)]:
            again = pickle.loads(pickle.dumps(component))
            assert type(again.client) is type(client)
            primary = getattr(again.client, "bound", getattr(again.client, "runnable", again.client))
            assert primary.openai_api_key.get_secret_value() == KEY and primary.top_logprobs == 5
            assert primary.root_client is not None and primary.root_client is not chat_openai().root_client


def test_a_pickled_guard_decides_again():
    guard = ToolCallGuard(json_model({"noul": 0.1}))
    again = pickle.loads(pickle.dumps(guard))
    decision = again.check("delete_file", {"path": "/"})
    assert decision.outcome == "block" and decision.probability == pytest.approx(0.1)


def test_an_engine_client_refuses_pickle_by_name():
    for component in components(fake_client(FIRST)) + [ToolCallGuard(fake_client(FIRST))]:
        with pytest.raises(TypeError, match=r"cannot be pickled with a SystemOneClient.*build it where it runs"):
            pickle.dumps(component)


# -- wrapped chat models as client= -----------------------------------------------------------------------

def test_with_retry_retries_a_decision():
    from jev_langchain import jev_client_from_chat_model

    def router(model: Any) -> JevRouter:  # the engine retries nothing itself: any second try is the wrapper's
        return JevRouter(jev_client_from_chat_model(model, max_retries=0), ROUTES)

    flaky = Broken(reply=json.dumps(TECH), failures=1)
    assert router(flaky.with_retry(stop_after_attempt=2, wait_exponential_jitter=False)).decide("x").route == "tech"
    with pytest.raises(Exception, match="the provider is down"):   # unwrapped, the same outage fails the decision
        router(Broken(reply=json.dumps(TECH), failures=1)).decide("x")
    bare, wrapped = Broken(reply=""), Broken(reply="")  # always down: every try of the wrapper reaches the model
    for model in (bare, wrapped.with_retry(stop_after_attempt=3, wait_exponential_jitter=False)):
        with pytest.raises(Exception, match="the provider is down"):
            router(model).decide("The app crashes")
    assert bare.calls >= 1 and wrapped.calls == 3 * bare.calls


def test_with_fallbacks_falls_back():
    down = Broken(reply="")
    router = JevRouter(down.with_fallbacks([json_model(TECH)]), ROUTES)
    assert router.decide("The app crashes").route == "tech"
    assert down.calls >= 1


def test_configurable_fields_serves_gate_guard_and_decision_model():
    model = json_model({"noul": 0.8}).configurable_fields(replies=ConfigurableField(id="replies"))
    assert JevGate(model, "It is fine.").decide("hi").probability == pytest.approx(0.8)
    assert ToolCallGuard(model).check("read_file", {"path": "a"}).outcome == "allow"
    assert JevDecisionModel(model).model == "scripted"


def test_fallbacks_forward_only_what_every_model_takes():
    wrapped = chat_openai().with_fallbacks([json_model(TECH)])
    assert ChatModelClient(wrapped).forward == frozenset()
    assert "logprobs" in ChatModelClient(chat_openai().with_retry()).forward


def test_a_wrapper_around_something_else_is_refused_by_name():
    with pytest.raises(TypeError, match=r"with_fallbacks"):
        ChatModelClient(RunnableLambda(lambda x: x).with_retry())
    with pytest.raises(TypeError, match="RunnableWithFallbacks"):
        JevRouter(json_model(TECH).with_fallbacks([RunnableLambda(lambda x: x)]), ROUTES)


# -- the classifier router as a LangGraph edge -----------------------------------------------------------

class Ticket(TypedDict, total=False):
    text: str
    team: str


def graph_with_edge(router: Any, path_map: list[str] | None) -> Any:
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(Ticket)
    graph.add_node("intake", lambda s: {})
    graph.add_node("billing", lambda s: {"team": "billing"})
    graph.add_node("tech", lambda s: {"team": "tech"})
    graph.add_edge(START, "intake")
    graph.add_conditional_edges("intake", router, path_map)
    graph.add_edge("billing", END)
    graph.add_edge("tech", END)
    return graph.compile()


@pytest.mark.parametrize("path_map", [list(ROUTES), None], ids=["path_map", "no_path_map"])
def test_the_bare_classifier_router_is_a_langgraph_edge(path_map):
    router = JevRouter(json_model(TECH), ROUTES, state=lambda s: s["text"])
    assert graph_with_edge(router, path_map).invoke({"text": "The app crashes"})["team"] == "tech"


def test_a_route_decision_is_equal_to_its_route_name():
    decision = JevRouter(json_model(TECH), ROUTES).decide("The app crashes")
    assert decision == "tech" and decision != "billing" and {"tech": 1}[decision] == 1
    assert f"{decision}" == "tech" and "probabilities" in str(decision)
    assert decision == decision.model_copy() and decision != decision.model_copy(update={"route": "billing"})


def test_guard_tool_still_wraps_with_a_wrapped_model():
    from langchain_core.tools import tool

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        return "contents"

    guarded = guard_tool(read_file, json_model({"noul": 0.9}).with_retry())
    assert guarded.invoke({"path": "a"}) == "contents"


# -- tracing (docs/langchain.md: the model's run nests under the decision's) ----------------------------

@pytest.mark.parametrize("timeout", [None, 30.0], ids=["no_timeout", "timeout"])
def test_the_chat_model_run_nests_under_the_decision_with_or_without_a_timeout(recorder, timeout):
    from jev_langchain import jev_client_from_chat_model

    router = JevRouter(jev_client_from_chat_model(json_model(TECH), timeout=timeout), ROUTES)
    assert router.decide("The app crashes", {"callbacks": [recorder]}).route == "tech"
    llm_runs = [r for r in recorder.runs if r["kind"] == "chat_model"]
    assert llm_runs and all(r["parent"] == recorder.one("jev_route")["id"] for r in llm_runs)
