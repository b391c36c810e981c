"""``POST /v1/decisions``: OpenAI's Decisions wire served by `jev serve`, read by the openai SDK's own
``client.decisions.create`` and by langchain-openai's ``OpenAIDecisions``, both unmodified, over loopback.

The gateway runs in front of a stub backend whose logprob window follows the state (``want=billing``,
``truth=yes``) and is nudged by a hash of the whole prompt, so two requests read the same distribution
only when the engine sent the same prompt: the same-distribution test compares ``/v1/systemone`` and
``/v1/decisions`` on that. A question whose instructions say ``REFUSE`` is refused by the stub's model.
"""

from __future__ import annotations

import json
import math
import re
import zlib
from typing import Any

import httpx
import openai
import pytest

from jev_shared.gateway.errors import ERRORS
from tests.gateway.conftest import KEY, MODEL, config_for, running
from tests.gateway.stub import FaultStub
from tests.helpers.replies import chat

pytest.importorskip("openai.resources.decisions", reason="the Decisions client is in openai >= 3")

STATE = "want=billing truth=yes: I was charged twice, please refund."
TEAM = {"type": "choice", "name": "team", "instructions": "Which team should handle this?",
        "choices": [{"value": "billing", "description": "payments and refunds"},
                    {"value": "technical", "description": "bugs"}]}
URGENCY = {"type": "score", "name": "urgency", "instructions": "How urgent is it?",
           "levels": [{"label": "can wait"}, {"label": "today"}, {"label": "now"}]}
GENUINE = {"type": "predicate", "name": "genuine", "instructions": "The customer is genuine."}


class PromptStub(FaultStub):
    """The fault stub's window, each logprob nudged by a hash of the prompt and the token; a refusal for
    a prompt that says REFUSE."""

    def respond(self, body: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
        prompt = json.dumps(body.get("messages", []))
        if "REFUSE" in prompt:
            return 200, {}, json.dumps(chat(None, None, "stop", refusal="I can't help with that.")).encode()
        status, headers, payload = super().respond(body)
        reply = json.loads(payload)
        for entry in reply["choices"][0]["logprobs"]["content"][0]["top_logprobs"]:
            entry["logprob"] -= zlib.crc32((prompt + entry["token"]).encode()) % 1000 / 1000
        return status, headers, json.dumps(reply).encode()


@pytest.fixture(scope="module")
def wire():
    """(gateway url, stub): a gateway of this module's own, keys on, on the prompt-hashing stub."""
    with PromptStub() as stub, running(config_for(stub, cache=False)) as url:
        yield url, stub


@pytest.fixture
def sdk(wire):
    with openai.OpenAI(base_url=wire[0] + "/v1", api_key=KEY, max_retries=0) as client:
        yield client


def test_the_openai_sdk_gets_each_question_type_in_question_order(sdk):
    decision = sdk.decisions.create(model=MODEL, input=STATE, questions=[GENUINE, TEAM, URGENCY])
    genuine, team, urgency = decision.answers
    assert decision.model == MODEL
    assert (genuine.type, genuine.name) == ("predicate", "genuine") and genuine.probability > 0.9
    assert (team.type, team.name, team.choice) == ("choice", "team", "billing")
    assert [p.value for p in team.probabilities] == ["billing", "technical"]
    assert math.isclose(sum(p.probability for p in team.probabilities), 1.0, abs_tol=1e-6) and 0 <= team.confidence <= 1
    assert urgency.type == "score" and [(p.value, p.label) for p in urgency.probabilities] == [
        (0, "can wait"), (1, "today"), (2, "now")]
    assert math.isclose(urgency.score, sum(p.value * p.probability for p in urgency.probabilities), abs_tol=1e-6)
    assert decision.usage.input_tokens > 0 and decision.usage.total_tokens == (
        decision.usage.input_tokens + decision.usage.output_tokens)


def test_typed_choice_values_and_messages_as_input(sdk):
    """Boolean values come back as booleans; messages with text and JSON parts are read as chat turns."""
    decision = sdk.decisions.create(model=MODEL, questions=[
        {"type": "choice", "instructions": "Is it a refund?", "choices": [{"value": True}, {"value": False}]}],
        input=[{"role": "system", "content": "You route tickets."},
               {"role": "user", "content": [{"type": "input_text", "text": STATE},
                                            {"type": "input_json", "data": {"order": 42}}]}])
    [answer] = decision.answers
    assert answer.name is None and isinstance(answer.choice, bool)
    assert [p.value for p in answer.probabilities] == [True, False]


@pytest.mark.slow
def test_langchain_openai_decisions_against_jev_serve(wire):
    decisions = pytest.importorskip("langchain_openai.decisions")
    runnable = decisions.OpenAIDecisions(model=MODEL, base_url=wire[0] + "/v1", api_key=KEY, max_retries=0)
    resp = runnable.invoke({"input": STATE, "questions": {
        "team": decisions.Choice(instructions=TEAM["instructions"],
                                 choices={"billing": "payments and refunds", "technical": "bugs"}),
        "urgency": decisions.Score(instructions=URGENCY["instructions"], levels=["can wait", "today", "now"]),
        "genuine": decisions.Predicate(instructions=GENUINE["instructions"])}})
    assert resp.model == MODEL and resp.choices["team"].choice == "billing"
    assert resp.scores["urgency"].legend == {0: "can wait", 1: "today", 2: "now"}
    assert resp.predicates["genuine"].probability > 0.9 and resp.request_id


def test_the_same_question_gets_the_same_distribution_on_both_wires(wire, sdk):
    """One prompt, one distribution: the Decisions wire asks the engine exactly what /v1/systemone asks."""
    sysone = httpx.post(wire[0] + "/v1/systemone", headers={"authorization": f"Bearer {KEY}"}, timeout=30, json={
        "model": MODEL, "state": STATE, "questions": {
            "team": {"type": "choice", "instructions": TEAM["instructions"],
                     "criteria": {"billing": "payments and refunds", "technical": "bugs"}},
            "urgency": {"type": "score", "instructions": URGENCY["instructions"],
                        "criteria": ["can wait", "today", "now"]},
            "genuine": {"type": "noul", "instructions": GENUINE["instructions"]}}})
    assert sysone.status_code == 200, sysone.text
    want = sysone.json()["answers"]
    team, urgency, genuine = sdk.decisions.create(model=MODEL, input=STATE, questions=[TEAM, URGENCY, GENUINE]).answers
    assert {p.value: p.probability for p in team.probabilities} == pytest.approx(want["team"]["probabilities"], abs=1e-9)
    assert {str(p.value): p.probability for p in urgency.probabilities} == pytest.approx(
        want["urgency"]["probabilities"], abs=1e-9)
    assert genuine.probability == pytest.approx(want["genuine"]["noul"], abs=1e-9)
    assert team.confidence == pytest.approx(want["team"]["confidence"]) and urgency.score == pytest.approx(
        want["urgency"]["score"])


def test_a_refused_question_is_a_refusal_and_the_others_keep_their_answers(sdk):
    decision = sdk.decisions.create(model=MODEL, input=STATE, questions=[
        TEAM, {"type": "predicate", "name": "odd", "instructions": "REFUSE to say this."}, GENUINE])
    team, odd, genuine = decision.answers
    assert (odd.type, odd.name) == ("refusal", "odd")
    assert team.choice == "billing" and genuine.probability > 0.9


def test_a_lone_refused_question_is_a_refusal(sdk):
    [answer] = sdk.decisions.create(model=MODEL, input=STATE, questions=[
        {"type": "predicate", "instructions": "REFUSE it."}]).answers
    assert answer.type == "refusal" and answer.name is None


@pytest.mark.parametrize(("question", "field", "kind"), [
    ({"type": "choice", "instructions": "Which?", "choices": [{"value": "only"}]}, "questions.1.choices",
     "invalid_request"),
    ({"type": "score", "instructions": " ", "levels": [{"label": "low"}, {"label": "high"}]},
     "questions.1.instructions", "invalid_question"),
    ({"type": "choice", "instructions": "Which?", "choices": [{"value": "true"}, {"value": True}]},
     "questions.1.choices", "invalid_question"),
    ({"type": "verdict", "instructions": "Which?"}, "questions.1", "invalid_request"),
])
def test_an_invalid_question_is_a_422_naming_the_field_before_any_backend_call(wire, sdk, question, field, kind):
    before = wire[1].requests
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        sdk.decisions.create(model=MODEL, input=STATE, questions=[GENUINE, question])
    err = caught.value
    assert err.body["field"] == field and err.body["type"] == kind and err.code == kind
    assert err.param == field.replace(".1", "[1]") and err.body["question_id"] == "1"
    assert wire[1].requests == before


def test_an_image_part_is_a_422_naming_it(sdk):
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        sdk.decisions.create(model=MODEL, questions=[GENUINE], input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}])
    assert caught.value.param == "input[0].content[0].type" and "input_image" in caught.value.message


def test_too_many_questions_is_the_gateways_limit(sdk):
    with pytest.raises(openai.UnprocessableEntityError) as caught:
        sdk.decisions.create(model=MODEL, input=STATE, questions=[GENUINE] * 65)
    assert caught.value.code == "too_many_questions" and caught.value.param == "questions"


def test_an_unknown_model_is_a_404_naming_model(sdk):
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.decisions.create(model="no-such-model", input=STATE, questions=[GENUINE])
    assert caught.value.code == "model_not_found" and caught.value.param == "model"


@pytest.mark.slow
@pytest.mark.parametrize("key", ["wrong-key", None])
def test_without_the_right_key_is_a_401(wire, key):
    headers = {"authorization": f"Bearer {key}"} if key else {}
    before = wire[1].requests
    r = httpx.post(wire[0] + "/v1/decisions", headers=headers, timeout=30,
                   json={"model": MODEL, "input": STATE, "questions": [GENUINE]})
    assert r.status_code == 401 and r.json()["error"]["type"] == "unauthorized"
    with openai.OpenAI(base_url=wire[0] + "/v1", api_key=key or "x", max_retries=0) as client, pytest.raises(
            openai.AuthenticationError):
        client.decisions.create(model=MODEL, input=STATE, questions=[GENUINE])
    assert wire[1].requests == before
    ok = httpx.post(wire[0] + "/v1/decisions", headers={"authorization": f"Bearer {KEY}"}, timeout=30,
                    json={"model": MODEL, "input": STATE, "questions": [GENUINE]})
    assert ok.status_code == 200 and ok.json()["answers"][0]["type"] == "predicate"  # the same body, with the key


@pytest.mark.slow
def test_openapi_documents_the_route_with_every_status(wire):
    spec = httpx.get(wire[0] + "/openapi.json").json()
    post = spec["paths"]["/v1/decisions"]["post"]
    assert post["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DecisionsRequest"}
    assert post["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/DecisionReply"}
    assert set(post["responses"]) == {"200"} | {str(row.status) for row in ERRORS.values()}
    for kind, row in ERRORS.items():  # the gateway's one error table, as /v1/systemone documents it
        assert f"`{kind}`" in post["responses"][str(row.status)]["description"], kind
        assert post["responses"][str(row.status)]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/DecisionsErrorBody"}
    assert post["security"] == [{"bearer": []}]
    question = spec["components"]["schemas"]["DecisionsRequest"]["properties"]["questions"]["items"]
    assert set(question["discriminator"]["mapping"]) == {"predicate", "choice", "score"}
    validator = pytest.importorskip("openapi_spec_validator")
    validator.validate(spec)


@pytest.mark.slow
def test_metrics_count_the_route_under_its_own_path(wire, sdk):
    sdk.decisions.create(model=MODEL, input=STATE, questions=[GENUINE])
    text = httpx.get(wire[0] + "/metrics", timeout=30).text
    assert re.search(r'jev_gateway_requests_total\{path="/v1/decisions",status="200"\} [1-9]', text)
