"""One question set through every surface: Chat Completions, Responses, Messages, hosted System One,
OpenAI Decisions — the same answer types back, and each surface's failure shapes mapped to the
right error. Cassettes: `responses_*` recorded from the embedded server, `documented_*` written
from the providers' documented shapes (cassettes/README.md).
"""

from __future__ import annotations

import anthropic
import openai
import pytest

from jev_shared import (
    Choice,
    ClientCapabilityError,
    IncompleteAnswerError,
    InvalidQuestionError,
    MalformedAnswerError,
    ModelRefusalError,
    Noul,
    ProviderError,
    Score,
    SystemOneClient,
    UnsupportedMethodError,
)
from jev_shared.surfaces.messages import fold_bounds
from tests.scenarios import scenarios

QUESTIONS = {
    "team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs", "sales": "deals"}),
    "urgency": Score(instructions="How urgent?", criteria=["low", "mid", "high"]),
    "spam": Noul(instructions="This is spam."),
}
TEAM = {"team": QUESTIONS["team"]}
TICKET = "I was charged twice."
GOLDEN = {"billing": 0.884873983, "technical": 0.084389690, "sales": 0.030736327}


def oai() -> openai.OpenAI:
    return openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test-not-a-real-key")


def claude() -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url="http://127.0.0.1:9", api_key="test-key")


# --- Responses ---------------------------------------------------------------------------------


def test_responses_reads_logprobs_through_include(documented):
    client = SystemOneClient(oai(), model="m", labels="letters", api="responses", method="logprobs", debug=True)
    with documented("documented_responses_logprobs") as cas:
        resp = client.system_one(TICKET, TEAM)
    assert resp.answers["team"].probabilities == pytest.approx(GOLDEN)
    assert resp.debug["api"] == "responses"
    request = resp.debug["questions"]["team"]["attempts"][0]["data"]
    assert request["include"] == ["message.output_text.logprobs"] and request["top_logprobs"] == 20
    assert request["max_output_tokens"] == 16 and "max_tokens" not in request
    assert cas.all_played


def test_responses_truncation_names_max_output_tokens(documented):
    client = SystemOneClient(oai(), model="m", labels="letters", api="responses", method="structured")
    with documented("documented_responses_incomplete") as cas, pytest.raises(IncompleteAnswerError) as info:
        client.system_one(TICKET, TEAM)
    assert info.value.field == "max_output_tokens" and cas.play_count == 2


def test_responses_refusal_part(documented):
    client = SystemOneClient(oai(), model="m", labels="letters", api="responses", method="structured")
    with documented("documented_responses_refusal"), pytest.raises(ModelRefusalError, match="can't help"):
        client.system_one(TICKET, TEAM)


def test_auto_moves_off_a_responses_route_that_answers_404_and_remembers(documented):
    client = SystemOneClient(oai(), model="m", labels="letters", method="logprobs")
    with documented("documented_responses_404") as cas:
        first = client.system_one(TICKET, TEAM)
        second = client.system_one(TICKET, TEAM)
    assert cas.all_played
    assert first.debug["api"] == second.debug["api"] == "chat_completions"
    assert first.usage.n_calls == 2 and second.usage.n_calls == 1


def test_explicit_responses_404_reaches_the_caller(documented):
    client = SystemOneClient(oai(), model="m", labels="letters", api="responses", method="logprobs")
    with documented("documented_responses_404"), pytest.raises(ProviderError) as info:
        client.system_one(TICKET, TEAM)
    assert info.value.status_code == 404


def test_recorded_llamacpp_responses_moves_logprobs_to_chat(cassette):
    """llama.cpp refuses top_logprobs on /v1/responses: auto re-asks on Chat Completions."""
    with cassette("responses_auto_moves_to_chat") as cas:
        [resp] = scenarios(oai(), "smollm2-135m")["responses_auto_moves_to_chat"]()
    assert cas.all_played and cas.play_count == 2
    assert cas.requests[0].path == "/v1/responses" and cas.requests[1].path == "/v1/chat/completions"
    assert resp.debug["api"] == "chat_completions"
    assert "re-asked on chat_completions" in resp.debug["retry_reasons"]["team"][0]
    assert sum(resp.answers["team"].probabilities.values()) == pytest.approx(1.0)


def test_recorded_llamacpp_responses_explicit_logprobs_is_reported(cassette):
    with cassette("responses_logprobs_explicit"), pytest.raises(ProviderError, match="top_logprobs requires"):
        scenarios(oai(), "smollm2-135m")["responses_logprobs_explicit"]()


def test_recorded_llamacpp_responses_ignores_text_format(cassette):
    """llama.cpp accepts text.format and ignores it; SmolLM2 then answers in prose: a typed error."""
    with cassette("responses_structured") as cas, pytest.raises(MalformedAnswerError, match="no JSON object"):
        scenarios(oai(), "smollm2-135m")["responses_structured"]()
    assert b'"text":{"format":{"type":"json_schema"' in cas.requests[0].body.replace(b" ", b"")
    assert cas.play_count == 4  # two questions, each with one corrective retry


def test_grammar_on_responses_is_refused_before_any_request():
    with pytest.raises(UnsupportedMethodError, match="api='chat_completions'"):
        SystemOneClient(oai(), model="m", labels="letters", api="responses", method="grammar").system_one(TICKET, TEAM)


# --- Messages ----------------------------------------------------------------------------------


def test_messages_answers_with_json_methods(documented):
    client = SystemOneClient(claude(), model="claude-test", debug=True)  # speaks only messages: auto → structured
    with documented("documented_messages_structured") as cas:
        resp = client.system_one(TICKET, TEAM)
    assert cas.all_played
    assert resp.answers["team"].choice == "billing" and resp.debug["methods"] == {"team": "structured"}
    assert resp.debug["api"] == "messages"
    request = resp.debug["questions"]["team"]["attempts"][0]["data"]
    schema = request["extra_body"]["output_config"]["format"]["schema"]
    assert "'minimum'" not in str(schema) and "minimum 0" in str(schema)  # bounds folded into descriptions
    assert request["system"] and all(m["role"] != "system" for m in request["messages"])
    assert request["max_tokens"] > 0


@pytest.mark.parametrize("method", ["logprobs", "grammar"])
def test_messages_refuses_token_methods_before_any_request(method):
    with pytest.raises(UnsupportedMethodError, match="Messages API"):
        SystemOneClient(claude(), model="c", method=method).system_one(TICKET, TEAM)


@pytest.mark.parametrize(("name", "error", "match"), [
    ("documented_messages_max_tokens", IncompleteAnswerError, "raise max_tokens"),
    ("documented_messages_refusal", ModelRefusalError, "refused"),
    ("documented_messages_context", IncompleteAnswerError, "context window"),
])
def test_messages_stop_reasons(documented, name, error, match):
    with documented(name), pytest.raises(error, match=match):
        SystemOneClient(claude(), model="c", method="structured").system_one(TICKET, TEAM)


def test_fold_bounds():
    assert fold_bounds({"type": "number", "minimum": 0, "maximum": 1}) == {"type": "number",
                                                                           "description": "minimum 0, maximum 1"}


# --- hosted System One -------------------------------------------------------------------------


def test_systemone_answers_all_questions_in_one_request(documented):
    client = SystemOneClient(oai(), model="jev-1", api="systemone", debug=True)
    with documented("documented_systemone_ok") as cas:
        resp = client.system_one(TICKET, QUESTIONS)
    assert cas.play_count == 1 and resp.usage.n_calls == 1
    assert resp.answers["team"].probabilities == pytest.approx(GOLDEN)
    assert resp.answers["urgency"].score == 1.2 and resp.answers["spam"].noul == 0.03
    assert resp.usage.input_tokens == 310 and resp.debug["api"] == "systemone"
    assert b"authorization" not in str(resp.debug).encode()
    body = resp.debug["questions"]["team"]["attempts"][0]["data"]["body"]
    assert set(body) == {"state", "model", "questions"} and list(body["questions"]) == ["team", "urgency", "spam"]


def test_systemone_401(documented):
    with documented("documented_systemone_401"), pytest.raises(ProviderError, match="TYPESAFE_API_KEY") as info:
        SystemOneClient(oai(), model="jev-1", api="systemone").system_one(TICKET, TEAM)
    assert info.value.status_code == 401 and "req_documented_2" in str(info.value)


def test_systemone_422_names_the_field(documented):
    with documented("documented_systemone_422"), pytest.raises(InvalidQuestionError) as info:
        SystemOneClient(oai(), model="jev-1", api="systemone").system_one(TICKET, TEAM)
    assert info.value.question_id == "team" and info.value.field == "criteria"


def test_systemone_429_backs_off(documented):
    with documented("documented_systemone_429_then_ok") as cas:
        resp = SystemOneClient(oai(), model="jev-1", api="systemone").system_one(TICKET, QUESTIONS)
    assert cas.all_played and resp.usage.n_retries == 1


def test_systemone_529_overloaded(documented):
    with documented("documented_systemone_529"), pytest.raises(ProviderError, match="overloaded") as info:
        SystemOneClient(oai(), model="jev-1", api="systemone", max_retries=1).system_one(TICKET, TEAM)
    assert info.value.status_code == 529


@pytest.mark.parametrize("option", [{"method": "logprobs"}, {"labels": "letters"}, {"layout": "split"}, {"debias": True},
                                    {"top_logprobs": 5}, {"thinking": False}, {"extra_body": {"x": 1}}])
def test_systemone_refuses_llm_options_by_name(option):
    name = next(iter(option))
    with pytest.raises(UnsupportedMethodError, match=name):
        SystemOneClient(oai(), model="jev-1", api="systemone", **option).system_one(TICKET, TEAM)


def test_systemone_without_client_needs_the_env(monkeypatch):
    monkeypatch.delenv("TYPESAFE_BASE_URL", raising=False)
    monkeypatch.delenv("TYPESAFE_API_KEY", raising=False)
    with pytest.raises(ProviderError, match="TYPESAFE_API_KEY"):
        SystemOneClient(None, model="jev-1", api="systemone")


# --- OpenAI Decisions --------------------------------------------------------------------------


needs_decisions = pytest.mark.skipif(not hasattr(openai.OpenAI(api_key="x"), "decisions"),
                                     reason="client.decisions exists in openai 3.x only")


@needs_decisions
def test_decisions_map_predicate_choice_score(documented):
    client = SystemOneClient(oai(), model="gpt-6-luna", api="decisions", debug=True)
    with documented("documented_decisions_ok") as cas:
        resp = client.system_one(TICKET, QUESTIONS)
    assert cas.all_played and resp.debug["api"] == "decisions"
    assert resp.answers["team"].choice == "billing" and resp.answers["team"].probabilities["sales"] == 0.03
    assert resp.answers["urgency"].probabilities == {"0": 0.1, "1": 0.6, "2": 0.3}
    assert resp.answers["spam"].noul == 0.03
    sent = resp.debug["questions"]["team"]["attempts"][0]["data"]["questions"]
    assert [q["type"] for q in sent] == ["choice", "score", "predicate"]


@needs_decisions
def test_decisions_refusal_fails_the_call(documented):
    with documented("documented_decisions_refusal"), pytest.raises(ModelRefusalError, match="urgency"):
        SystemOneClient(oai(), model="gpt-6-luna", api="decisions").system_one(TICKET, QUESTIONS)


def test_a_client_without_the_surface_is_a_capability_error():
    with pytest.raises(ClientCapabilityError, match="chat_completions|messages"):
        SystemOneClient(claude(), model="c", api="chat_completions")
    with pytest.raises(ClientCapabilityError):
        SystemOneClient(object(), model="c")
