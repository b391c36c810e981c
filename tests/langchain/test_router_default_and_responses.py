"""Two leftovers of the LangChain fit, over real HTTP on loopback.

- A choice the model gives no signal on takes its default option, so LangChain's own
  ``ModelRouterMiddleware`` goes on with the default model instead of ending the agent's run (a noul
  or a score still raises: there is no safe default for "is this call risky?").
- ``ChatOpenAI(use_responses_api=True)`` on a llama.cpp server answers: its ``/v1/responses``
  ignores ``text.format``, so the schema also goes as llama.cpp's ``json_schema`` body field.

No signal is made deterministic with the gateway tests' stub backend (a real HTTP server): its token
window holds yes / no / digits, never the names ``fast`` or ``strong``.
"""

from __future__ import annotations

import json

import httpx
import pytest
from langchain_core.decisions import Choice, Noul
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

from jev_langchain import JevDecisionModel, jev_client_from_chat_model
from jev_langchain.chat_model import fills_schema_by_body
from jev_shared import InvalidQuestionError, LabelReadoutError, SystemOneClient
from tests.gateway.stub import FaultStub

pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.beta_decorator.LangChainBetaWarning")
agents = pytest.importorskip("langchain.agents", reason="LangChain's middleware needs the langchain package")
from langchain.agents.middleware import ModelChoice, ModelRouterMiddleware  # noqa: E402


@pytest.fixture(scope="module")
def stub():
    with FaultStub() as server:
        yield server


def silent_classifier(stub: FaultStub, **kw) -> JevDecisionModel:
    """A classifier over the stub: every choice between names reads no signal."""
    import openai

    client = openai.OpenAI(base_url=stub.base_url, api_key="-", max_retries=0)
    return JevDecisionModel(client=SystemOneClient(client, model="stub", api="chat_completions", debias=False), **kw)


def routed_agent(classifier: JevDecisionModel):
    fast = GenericFakeChatModel(messages=iter([AIMessage("fast answer")]))
    strong = GenericFakeChatModel(messages=iter([AIMessage("strong answer")]))
    router = ModelRouterMiddleware(choices={"fast": ModelChoice(model=fast, criteria="Simple questions"),
                                            "strong": ModelChoice(model=strong, criteria="Hard reasoning")},
                                   instructions="Choose the cheapest model that can do the task.",
                                   classifier=classifier)
    return agents.create_agent(fast, [], middleware=[router])


def test_no_signal_routes_to_the_first_model_and_the_run_goes_on(stub):
    out = routed_agent(silent_classifier(stub)).invoke({"messages": [HumanMessage("hi there")]})
    route = out["model_route"]
    assert route.choice == "fast" and route.confidence == 0.0  # the default, and no evidence for it
    assert route.probabilities == pytest.approx({"fast": 0.5, "strong": 0.5})
    assert out["messages"][-1].content == "fast answer"


def test_the_default_model_can_be_named(stub):
    classifier = silent_classifier(stub, choice_defaults={"model_route": "strong"})
    out = routed_agent(classifier).invoke({"messages": [HumanMessage("hi there")]})
    assert out["model_route"].choice == "strong" and out["messages"][-1].content == "strong answer"


def test_on_no_signal_raise_still_ends_the_run(stub):
    with pytest.raises(LabelReadoutError, match="no signal"):
        routed_agent(silent_classifier(stub, on_no_signal="raise")).invoke({"messages": [HumanMessage("hi")]})


def test_a_default_that_is_not_an_option_is_refused_before_any_call(stub):
    stub.reset()
    classifier = silent_classifier(stub, choice_defaults={"model_route": "medium"})
    with pytest.raises(InvalidQuestionError, match="medium"):
        routed_agent(classifier).invoke({"messages": [HumanMessage("hi")]})
    assert stub.requests == 0


def test_a_noul_without_signal_still_raises(stub):
    classifier = silent_classifier(stub)
    window_without_yes_no = Choice(instructions="Which?", criteria={"fast": None, "strong": None})
    assert classifier.invoke({"state": "x", "questions": {"q": window_without_yes_no}}).choices["q"].choice == "fast"
    # the stub's window does hold yes/no, so a noul has signal there; a score over names is asked instead
    with pytest.raises(LabelReadoutError):
        JevDecisionModel(client=classifier.jev_pair.sync, on_no_signal="raise").invoke(
            {"state": "x", "questions": {"q": window_without_yes_no}})
    assert classifier.invoke({"state": "truth=yes", "questions": {"n": Noul(instructions="ok?")}}).nouls["n"].noul > 0.9


def test_only_servers_other_than_openai_get_the_body_schema():
    from langchain_openai import ChatOpenAI

    assert fills_schema_by_body(ChatOpenAI(model="m", api_key="-", use_responses_api=True,
                                           base_url="http://127.0.0.1:8080/v1"))
    assert not fills_schema_by_body(ChatOpenAI(model="m", api_key="-", use_responses_api=True))
    assert not fills_schema_by_body(ChatOpenAI(model="m", api_key="-", use_responses_api=True,
                                               base_url="https://api.openai.com/v1"))
    assert not fills_schema_by_body(ChatOpenAI(model="m", api_key="-", base_url="http://127.0.0.1:8080/v1"))


@pytest.mark.slow
@pytest.mark.live
def test_chat_openai_on_the_responses_api_answers_on_llama_cpp(local_server):
    from langchain_openai import ChatOpenAI

    bodies: list[dict] = []

    def record(request: httpx.Request) -> None:
        bodies.append(json.loads(request.content))

    llm = ChatOpenAI(base_url=local_server.base_url, api_key="-", model=local_server.model, use_responses_api=True,
                     max_retries=0, http_client=httpx.Client(event_hooks={"request": [record]}, timeout=120))
    model = JevDecisionModel(client=jev_client_from_chat_model(llm))
    resp = model.invoke({"state": "I was charged twice", "questions": {
        "team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"})}})
    assert resp.choices["team"].choice in {"billing", "technical"}
    assert sum(resp.choices["team"].probabilities.values()) == pytest.approx(1.0)
    structured = [b for b in bodies if (b.get("text") or {}).get("format")]  # the JSON asks (after no logprobs)
    assert structured and all(b["json_schema"] == b["text"]["format"]["schema"] for b in structured)
