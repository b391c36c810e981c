"""JevGate: passes its input through, blocks it, falls back, and fails closed."""

from __future__ import annotations

import asyncio
import math

import pytest
from langchain_core.runnables import RunnableLambda

from jev_langchain import GateBlocked, JevGate
from jev_shared import ProviderError, SystemOneClient

from .fakes import FIRST, SECOND, FakeOpenAI, fake_async_client, fake_client

STATEMENT = "The message is a genuine customer question, not spam."


def counting_llm() -> tuple[RunnableLambda, list]:
    calls: list = []
    return RunnableLambda(lambda x: calls.append(x) or f"answer to {x}", name="llm"), calls


def test_open_gate_passes_the_input_through_unchanged():
    message = {"text": "How do I reset my password?"}
    assert JevGate(fake_client(FIRST), STATEMENT).invoke(message) is message


def test_gate_in_a_pipeline_calls_the_llm_only_when_open():
    llm, calls = counting_llm()
    assert (JevGate(fake_client(FIRST), STATEMENT) | llm).invoke("hi") == "answer to hi"
    assert calls == ["hi"]
    with pytest.raises(GateBlocked):
        (JevGate(fake_client(SECOND), STATEMENT) | llm).invoke("BUY NOW")
    assert calls == ["hi"]


def test_blocked_raises_with_probability_question_and_input():
    with pytest.raises(GateBlocked, match="P\\(true\\) = 0.052 < threshold 0.5") as info:
        JevGate(fake_client(SECOND), STATEMENT).invoke("BUY NOW")
    err = info.value
    assert err.probability == pytest.approx(1 / (1 + math.exp(2.9)))
    assert err.question == STATEMENT and err.input == "BUY NOW" and err.error is None


def test_threshold_decides_which_way_the_gate_opens():
    assert JevGate(fake_client(FIRST), STATEMENT, threshold=0.9).invoke("x") == "x"  # P(true) ~ 0.948
    with pytest.raises(GateBlocked):
        JevGate(fake_client(FIRST), STATEMENT, threshold=0.99).invoke("x")


def test_blocked_input_goes_to_the_fallback(recorder):
    fallback = RunnableLambda(lambda x: f"refused: {x}", name="fallback")
    gate = JevGate(fake_client(SECOND), STATEMENT, on_block=fallback)
    assert gate.invoke("BUY NOW", {"callbacks": [recorder]}) == "refused: BUY NOW"
    run = recorder.one("fallback")
    assert run["parent"] == recorder.one("JevGate")["id"] and "gate:blocked" in run["tags"]
    assert run["metadata"]["jev_gate_probability"] < 0.5


def test_a_provider_error_fails_closed_by_default():
    fake = FakeOpenAI(FIRST, fail=True)
    llm, calls = counting_llm()
    with pytest.raises(GateBlocked, match="the decision failed .*ProviderError") as info:
        (JevGate(SystemOneClient(fake, model="fake", labels="letters"), STATEMENT) | llm).invoke("hi")
    assert info.value.probability is None and "provider is down" in info.value.error
    assert calls == [] and len(fake.wire) == 1


def test_on_error_allow_and_raise():
    assert JevGate(fake_client(fail=True), STATEMENT, on_error="allow").invoke("hi") == "hi"
    with pytest.raises(ProviderError, match="provider is down"):
        JevGate(fake_client(fail=True), STATEMENT, on_error="raise").invoke("hi")


def test_decide_returns_the_probability_and_raises_on_failure():
    # gate.decide() returns a GateDecision; its probability is what decide() returned before
    assert JevGate(fake_client(FIRST), STATEMENT).decide("x").probability == pytest.approx(1 / (1 + math.exp(-2.9)))
    with pytest.raises(ProviderError):
        JevGate(fake_client(fail=True), STATEMENT).decide("x")


def test_decision_is_traced_and_dispatched(recorder):
    JevGate(fake_client(FIRST), STATEMENT).invoke("x", {"callbacks": [recorder]})
    decide = recorder.one("jev_gate")
    assert decide["parent"] == recorder.one("JevGate")["id"]
    [event] = recorder.events
    assert event["name"] == "jev_gate" and event["data"]["allowed"] is True
    assert event["data"]["probability"] > 0.9


def test_async_gate_both_ways():
    async def run():
        passed = await JevGate(fake_async_client(FIRST), STATEMENT).ainvoke("ok")
        fallback = await JevGate(fake_async_client(SECOND), STATEMENT, on_block=lambda x: "no").ainvoke("spam")
        try:
            await JevGate(fake_async_client(fail=True), STATEMENT).ainvoke("x")
        except GateBlocked as exc:
            failed = exc
        return passed, fallback, failed

    passed, fallback, failed = asyncio.run(run())
    assert passed == "ok" and fallback == "no" and failed.error is not None


def test_gate_batch():
    assert JevGate(fake_client(FIRST), STATEMENT).batch(["a", "b", "c"], {"max_concurrency": 2}) == ["a", "b", "c"]


@pytest.mark.live
def test_live_gate_opens_exactly_when_the_probability_clears_the_threshold(local_client):
    gate = JevGate(local_client, "The message is polite.", threshold=0.5)
    message = "Thank you so much for your help!"
    p = gate.decide(message).probability  # decide() returns a GateDecision
    assert 0.0 <= p <= 1.0
    try:
        out = gate.invoke(message)
    except GateBlocked as exc:
        assert exc.probability is not None and exc.probability < 0.5 and exc.input == message
    else:
        assert out == message
    always_open = JevGate(local_client, "The message is polite.", threshold=0.0)
    assert always_open.invoke(message) == message
