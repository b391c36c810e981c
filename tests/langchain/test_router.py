"""JevRouter: routing, the default route, tracing, async, batch, stream, schemas."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterator

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableGenerator, RunnableLambda

from jev_langchain import JevRouter, RouteConfidenceError, RouteDecision
from jev_shared import AsyncSystemOneClient, InvalidQuestionError, SystemOneClient

from .fakes import FIRST, SECOND, TIE, AsyncFakeOpenAI, FakeOpenAI, fake_async_client, fake_client


def make_router(client, **kw) -> JevRouter:
    return JevRouter(
        client,
        {"billing": ("Invoices, refunds and payments", RunnableLambda(lambda x: ("billing", x), name="billing_chain")),
         "tech": ("Bugs, errors and outages", RunnableLambda(lambda x: ("tech", x), name="tech_chain"))},
        "Which team should handle this ticket?",
        **kw,
    )


def test_routes_to_the_most_probable_branch_with_the_input_unchanged():
    ticket = {"subject": "charged twice", "body": "refund please"}
    assert make_router(fake_client(FIRST)).invoke(ticket) == ("billing", ticket)
    out = make_router(fake_client(SECOND)).invoke(ticket)
    assert out[0] == "tech" and out[1] is ticket


def test_decide_returns_the_distribution_without_running_a_branch():
    ran = []
    router = JevRouter(fake_client(FIRST), {"billing": ("Invoices", lambda x: ran.append(x)), "tech": ("Bugs", lambda x: ran.append(x))})
    d = router.decide("I was charged twice")
    assert isinstance(d, RouteDecision)
    assert d.route == d.choice == "billing"
    assert d.probabilities["billing"] == pytest.approx(1 / (1 + math.exp(-2.9)))
    assert math.isclose(sum(d.probabilities.values()), 1.0)
    assert d.method == "logprobs" and d.latency_ms >= 0 and not d.defaulted
    assert ran == []


def test_the_question_lists_every_route_description():
    fake = FakeOpenAI(FIRST)
    make_router(SystemOneClient(fake, model="fake", labels="letters")).decide("hello")
    prompt = str(fake.wire[0]["messages"])
    assert "Invoices, refunds and payments" in prompt and "Bugs, errors and outages" in prompt
    assert "Which team should handle this ticket?" in prompt


def test_below_min_confidence_the_default_route_runs():
    router = make_router(fake_client(TIE), default="tech", min_confidence=0.5)
    assert router.invoke("hm")[0] == "tech"
    d = router.decide("hm")
    assert d.defaulted and d.route == "tech" and d.choice == "billing" and d.confidence < 0.5


def test_confident_decisions_ignore_the_default():
    assert make_router(fake_client(FIRST), default="tech", min_confidence=0.5).invoke("x")[0] == "billing"


def test_below_min_confidence_without_default_is_a_clear_error():
    ran = []
    router = JevRouter(fake_client(TIE), {"a": ("A", ran.append), "b": ("B", ran.append)}, min_confidence=0.9)
    with pytest.raises(RouteConfidenceError, match="min_confidence 0.9.*no default route") as info:
        router.invoke("x")
    assert info.value.decision.choice == "a" and ran == []


def test_routes_without_a_branch_make_a_classifier():
    router = JevRouter(fake_client(SECOND), {"positive": "Happy customer", "negative": "Unhappy customer"})
    out = router.invoke("this is awful")
    assert isinstance(out, RouteDecision) and out.route == "negative"
    assert router.OutputType is RouteDecision


def test_routes_as_a_list_of_tuples():
    router = JevRouter(fake_client(SECOND), [("a", "First", lambda x: "A"), ("b", "Second", lambda x: "B")])
    assert router.invoke("x") == "B"


def test_state_callable_chooses_what_the_model_reads():
    fake = FakeOpenAI(FIRST)
    router = make_router(SystemOneClient(fake, model="fake", labels="letters"), state=lambda t: t["body"])
    ticket = {"subject": "SUBJECT-XYZ", "body": "BODY-123"}
    assert router.invoke(ticket) == ("billing", ticket)
    prompt = str(fake.wire[0]["messages"])
    assert "BODY-123" in prompt and "SUBJECT-XYZ" not in prompt


def test_messages_are_read_as_chat_turns():
    fake = FakeOpenAI(FIRST)
    make_router(SystemOneClient(fake, model="fake", labels="letters")).invoke([HumanMessage("my card was charged"), AIMessage("sorry")])
    prompt = str(fake.wire[0]["messages"])
    assert "user: my card was charged" in prompt and "assistant: sorry" in prompt


def test_bad_input_raises_before_any_request():
    fake = FakeOpenAI(FIRST)
    router = make_router(SystemOneClient(fake, model="fake", labels="letters"))
    with pytest.raises(InvalidQuestionError, match="JevRouter input .*must not be empty"):
        router.invoke("   ")
    with pytest.raises(InvalidQuestionError, match="JSON"):
        router.invoke({"when": object()})
    assert fake.wire == []


def test_callbacks_tags_and_metadata_reach_the_branch(recorder):
    router = make_router(fake_client(FIRST))
    router.invoke("charged twice", {"callbacks": [recorder], "tags": ["ticket"], "metadata": {"tenant": "acme"}})
    top, decide, branch = recorder.one("JevRouter"), recorder.one("jev_route"), recorder.one("billing_chain")
    assert top["parent"] is None
    assert decide["parent"] == top["id"] and branch["parent"] == top["id"]
    assert "route:billing" in branch["tags"] and "ticket" in branch["tags"]
    assert branch["metadata"]["tenant"] == "acme"
    assert branch["metadata"]["jev_route"] == "billing" and branch["metadata"]["jev_method"] == "logprobs"
    assert set(branch["metadata"]["jev_probabilities"]) == {"billing", "tech"}
    assert recorder.named("tech_chain") == []
    [event] = [e for e in recorder.events if e["name"] == "jev_route"]
    assert event["data"]["route"] == "billing" and event["run_id"] == decide["id"]


def test_custom_event_shows_in_astream_events():
    async def run() -> list[dict]:
        return [e async for e in make_router(fake_client(FIRST)).astream_events("x", version="v2")]

    events = asyncio.run(run())
    custom = [e for e in events if e["event"] == "on_custom_event"]
    assert [e["name"] for e in custom] == ["jev_route"]
    assert custom[0]["data"]["route"] == "billing"


def test_ainvoke_uses_the_async_client():
    fake = AsyncFakeOpenAI(SECOND)
    out = asyncio.run(make_router(AsyncSystemOneClient(fake, model="fake", labels="letters")).ainvoke("the app crashes"))
    assert out == ("tech", "the app crashes")
    assert len(fake.wire) == 1


def test_async_callbacks_reach_the_branch(recorder):
    asyncio.run(make_router(fake_async_client(FIRST)).ainvoke("x", {"callbacks": [recorder], "tags": ["t"]}))
    top, branch = recorder.one("JevRouter"), recorder.one("billing_chain")
    assert branch["parent"] == top["id"] and {"route:billing", "t"} <= set(branch["tags"])


def test_sync_call_on_an_async_client_says_what_to_do():
    with pytest.raises(TypeError, match="ainvoke"):
        make_router(fake_async_client(FIRST)).invoke("x")


def test_ainvoke_on_a_sync_client_runs_in_a_thread():
    assert asyncio.run(make_router(fake_client(FIRST)).ainvoke("x")) == ("billing", "x")


def test_batch_honours_max_concurrency():
    fake = FakeOpenAI(FIRST, delay=0.05)
    out = make_router(SystemOneClient(fake, model="fake", labels="letters")).batch([f"t{i}" for i in range(6)],
                                                                                 {"max_concurrency": 2})
    assert out == [("billing", f"t{i}") for i in range(6)]
    assert fake.wire.peak == 2


def test_abatch_honours_max_concurrency():
    fake = AsyncFakeOpenAI(SECOND, delay=0.05)
    client = AsyncSystemOneClient(fake, model="fake", labels="letters")
    out = asyncio.run(make_router(client).abatch([f"t{i}" for i in range(5)], {"max_concurrency": 3}))
    assert out == [("tech", f"t{i}") for i in range(5)]
    assert fake.wire.peak == 3


def words(chunks: Iterator[str]) -> Iterator[str]:
    for text in chunks:
        yield from text.split()


def test_stream_decides_then_streams_the_branch(recorder):
    router = JevRouter(fake_client(FIRST), {"echo": ("Echo it", RunnableGenerator(words, name="echo")),
                                            "other": ("Other", lambda x: "other")})
    assert list(router.stream("one two three", {"callbacks": [recorder]})) == ["one", "two", "three"]
    assert recorder.one("echo")["parent"] == recorder.one("JevRouter")["id"]


async def awords(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    async for text in chunks:
        for word in text.split():
            yield word


def test_astream_decides_then_streams_the_branch():
    router = JevRouter(fake_async_client(FIRST), {"echo": ("Echo it", RunnableGenerator(words, awords)),
                                                  "other": ("Other", lambda x: "other")})

    async def run() -> list[str]:
        return [c async for c in router.astream("a b")]

    assert asyncio.run(run()) == ["a", "b"]


def test_stream_of_a_classifier_yields_the_decision():
    chunks = list(JevRouter(fake_client(SECOND), {"a": "A", "b": "B"}).stream("x"))
    assert len(chunks) == 1 and chunks[0].route == "b"


def test_schemas_follow_the_branches():
    def to_len(text: str) -> int:
        return len(text)

    def shout(text: str) -> str:
        return text.upper()

    router = JevRouter(fake_client(FIRST), {"len": ("Length", to_len), "shout": ("Shout", shout)})
    assert router.get_input_jsonschema()["type"] == "string"
    out = router.get_output_jsonschema()
    assert {s["type"] for s in out["anyOf"]} == {"integer", "string"}
    classifier = JevRouter(fake_client(FIRST), {"a": "A", "b": "B"})
    assert "route" in classifier.get_output_jsonschema()["properties"]


@pytest.mark.live
def test_live_router_picks_one_of_the_routes(local_client, recorder):
    seen = []
    router = JevRouter(
        local_client,
        {"billing": ("Invoices, refunds and payments", lambda x: seen.append(("billing", x)) or "billing"),
         "technical": ("Bugs, errors and outages", lambda x: seen.append(("technical", x)) or "technical"),
         "sales": ("Prices, plans and demos", lambda x: seen.append(("sales", x)) or "sales")},
        "Which team should handle this ticket?",
    )
    ticket = "I was charged twice for my subscription this month."
    out = router.invoke(ticket, {"callbacks": [recorder], "tags": ["live"]})
    assert out in {"billing", "technical", "sales"}
    assert seen == [(out, ticket)]
    d = router.decide(ticket)
    assert set(d.probabilities) == {"billing", "technical", "sales"}
    assert math.isclose(sum(d.probabilities.values()), 1.0, abs_tol=1e-6)
    assert 0.0 <= d.confidence <= 1.0 and d.method in {"logprobs", "structured"}
    branch = [r for r in recorder.runs if f"route:{out}" in r["tags"]]
    assert len(branch) == 1 and "live" in branch[0]["tags"]
    assert branch[0]["parent"] == recorder.one("JevRouter")["id"]


@pytest.mark.slow
@pytest.mark.live
def test_live_async_router(local_server):
    from jev_shared import AsyncSystemOneClient

    client = AsyncSystemOneClient(local_server.async_client(), model=local_server.model)
    router = JevRouter(client, {"yes": ("Agrees", lambda x: "yes"), "no": ("Disagrees", lambda x: "no")})

    async def run() -> list[str]:
        return await router.abatch(["sure, do it", "no way", "absolutely"], {"max_concurrency": 2})

    assert set(asyncio.run(run())) <= {"yes", "no"}
