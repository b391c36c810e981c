"""Every provider failure is a typed error or a documented fallback; nothing partial comes back.

The cassettes here are written from the providers' documented shapes (no server on this machine
refuses, filters, rate-limits or drops logprobs); see cassettes/README.md. They replay through the
real openai SDK and the engine's real transport.
"""

from __future__ import annotations

import openai
import pytest

from jev_shared import (
    Choice,
    MalformedAnswerError,
    ModelRefusalError,
    Noul,
    ProviderError,
    SystemOneClient,
)
from jev_shared.errors import LabelReadoutError
from tests.helpers import provider
from tests.helpers import replies as r

TEAM = Choice(instructions="Which team?", criteria={"billing": "", "technical": "", "sales": ""})
TICKET = "I was charged twice."


def engine(**kw) -> SystemOneClient:
    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test-not-a-real-key")
    kw.setdefault("max_concurrency", 1)
    kw.setdefault("api", "chat_completions")
    kw.setdefault("labels", "letters")  # the documented windows hold letters
    return SystemOneClient(client, model="documented-model", **kw)


def test_refusal_is_a_typed_error_with_the_providers_words_and_is_not_retried(documented):
    with documented("documented_refusal") as cas, pytest.raises(ModelRefusalError) as info:
        engine(method="logprobs").system_one(TICKET, {"team": TEAM})
    assert "can't help" in str(info.value) and info.value.refusal
    assert cas.play_count == 1


def test_content_filter_is_a_refusal(documented):
    with documented("documented_content_filter") as cas, pytest.raises(ModelRefusalError, match="content_filter"):
        engine(method="structured").system_one(TICKET, {"team": TEAM})
    assert cas.play_count == 1


def test_logprobs_null_with_200(documented):
    with documented("documented_logprobs_null"), pytest.raises(LabelReadoutError, match="no logprobs") as info:
        engine(method="logprobs").system_one(TICKET, {"team": TEAM})
    assert info.value.provider_cannot

    client = engine(method="auto", debug=True)
    with documented("documented_logprobs_null") as cas:
        first = client.system_one(TICKET, {"team": TEAM})
        assert first.debug["methods"] == {"team": "structured"}
        assert first.answers["team"].choice == "billing" and first.usage.n_calls == 2
        second = client.system_one(TICKET, {"team": TEAM})  # the second absence is remembered
        assert second.usage.n_calls == 2
        third = client.system_one(TICKET, {"team": TEAM})  # straight to structured now
        assert third.usage.n_calls == 1
        request = third.debug["questions"]["team"]["attempts"][0]["data"]
        assert "logprobs" not in request and request["response_format"]["type"] == "json_schema"
    assert cas.all_played


def test_reasoning_only_reply_says_so(documented):
    with documented("documented_reasoning_only") as cas, pytest.raises(MalformedAnswerError, match="reasoning-only"):
        engine(method="structured").system_one(TICKET, {"team": TEAM})
    assert cas.play_count == 2  # one corrective retry, then the error with the last reason


def test_think_block_inside_content_is_stripped(documented):
    with documented("documented_think_block"):
        resp = engine(mode="system2").system_one(TICKET, {"team": TEAM})
    assert resp.answers["team"].probabilities == pytest.approx({"billing": 0.9, "technical": 0.1, "sales": 0.0})


def test_reasoning_field_is_kept_in_debug_never_parsed(documented):
    with documented("documented_reasoning_field"):
        resp = engine(mode="system2", debug=True).system_one(TICKET, {"team": TEAM})
    assert resp.answers["team"].choice == "billing"
    assert "billing matter" in resp.debug["questions"]["team"]["readout"]["reasoning"]


def test_429_is_retried_honouring_retry_after(documented):
    with documented("documented_429_then_success") as cas:
        resp = engine(method="logprobs").system_one(TICKET, {"team": TEAM})
    assert cas.all_played
    assert resp.usage.n_retries == 1 and resp.usage.n_calls == 1
    assert resp.answers["team"].choice == "billing"
    assert resp.usage.latency_ms >= 20  # waited the server's retry-after-ms, not the 1 s retry-after


def test_429_without_retries_left_is_a_provider_error(documented):
    with documented("documented_429_then_success"), pytest.raises(ProviderError) as info:
        engine(method="logprobs", max_retries=0).system_one(TICKET, {"team": TEAM})
    assert info.value.status_code == 429 and "Rate limit" in str(info.value)


def asked_twice(documented, name: str, **options):
    """The same question twice on one client, over a documented cassette that must play out in full."""
    client = engine(**options)
    with documented(name) as cas:
        first = client.system_one(TICKET, {"team": TEAM})
        second = client.system_one(TICKET, {"team": TEAM})
    assert cas.all_played
    return first, second


def test_a_refused_logprobs_field_is_remembered_at_once(documented):
    first, second = asked_twice(documented, "documented_400_logprobs_refused", method="auto")
    assert first.debug["methods"] == second.debug["methods"] == {"team": "structured"}
    assert first.usage.n_calls == 2 and second.usage.n_calls == 1


def test_explicit_logprobs_reports_the_refusal(documented):
    with documented("documented_400_logprobs_refused"), pytest.raises(ProviderError, match="logprobs is not supported"):
        engine(method="logprobs").system_one(TICKET, {"team": TEAM})


def test_a_refused_optional_field_is_dropped_and_remembered(documented):
    first, second = asked_twice(documented, "documented_400_field_refused", method="logprobs", debug=True)
    assert first.debug["server_limits"] == ["chat_template_kwargs"]
    attempts = [a["data"] for a in first.debug["questions"]["team"]["attempts"] if a["kind"] == "request"]
    assert "chat_template_kwargs" in attempts[0]["extra_body"]
    assert "chat_template_kwargs" not in attempts[1].get("extra_body", {})
    assert second.usage.n_calls == 1  # remembered: not sent again
    assert first.answers["team"].choice == "billing"


def test_a_refused_value_falls_back_for_that_question_without_caching(documented):
    first, second = asked_twice(documented, "documented_400_top_logprobs_value", method="auto")
    assert first.debug["methods"] == {"team": "structured"}
    assert second.debug["methods"] == {"team": "logprobs"}  # tried again: nothing was cached


def test_an_outage_is_raised_and_never_changes_the_method(documented):
    """A 5xx that outlives the retries says nothing about logprobs: no structured re-ask, no strike."""
    client = engine(method="auto", max_retries=0)
    with documented("documented_500_outage") as cas:
        for _ in range(2):
            with pytest.raises(ProviderError) as info:
                client.system_one(TICKET, {"team": TEAM})
            assert info.value.status_code == 500
        back = client.system_one(TICKET, {"team": TEAM})  # two outages: still logprobs once the server is back
    assert cas.all_played and cas.play_count == 3
    assert back.debug["methods"] == {"team": "logprobs"} and back.answers["team"].choice == "billing"


def test_a_logprobs_refusal_in_structured_fields_falls_back(documented):
    """param='logprobs', code='unsupported_parameter', and a message no regex was written for."""
    client = engine(method="auto")
    with documented("documented_400_logprobs_unsupported") as cas:
        resp = client.system_one(TICKET, {"team": TEAM})
    assert cas.all_played
    assert resp.debug["methods"] == {"team": "structured"} and resp.answers["team"].choice == "billing"


def test_a_responses_logprobs_refusal_falls_back(documented):
    """On Responses the logprobs ride in `include`: a 400 'logprobs is not supported' refuses that."""
    client = engine(method="auto", api="responses")
    with documented("documented_responses_400_logprobs") as cas:
        resp = client.system_one(TICKET, {"team": TEAM})
    assert cas.all_played
    assert resp.debug["methods"] == {"team": "structured"} and resp.answers["team"].choice == "billing"


def test_openai_minus_9999(documented):
    with documented("documented_openai_minus_9999"):
        resp = engine(method="logprobs").system_one(TICKET, {"team": TEAM})
    assert resp.answers["team"].probabilities["technical"] == 0.0
    assert sum(resp.answers["team"].probabilities.values()) == pytest.approx(1.0)


def one_refuses(req):
    """Question 'b' is refused (a Chat Completions ``refusal``), the others answer; no real server refuses here."""
    if "Statement: b" in req["messages"][0]["content"]:
        return r.chat(None, None, "stop", refusal="no")
    return r.chat("A", r.chat_logprobs([("A", -0.1), ("B", -2.0)]), "stop")


def test_one_failing_question_fails_the_whole_call_with_the_first_error_in_order():
    fake = provider(one_refuses)
    client = SystemOneClient(fake, model="m", labels="letters", method="logprobs")
    questions = {q: Noul(instructions=q) for q in ("a", "b", "c")}
    with pytest.raises(ModelRefusalError):
        client.system_one(TICKET, questions)
    assert len(fake.wire) == 3
