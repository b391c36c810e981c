"""order="both": a choice asked with its options as listed and reversed, combined so the order cannot move it."""

from __future__ import annotations

import pytest

from jev_shared import Choice, ChoiceAnswer, Example, Noul, NoulAnswer, SystemOneClient, SystemOneResponse, Usage
from jev_shared.orders import combined, reversed_question

TEAM = {"billing": "Payments, charges and refunds", "technical": "Bugs, crashes and errors",
        "sales": "Quotes, pricing and new plans"}


def test_a_choice_reverses_its_options_and_its_own_examples_and_nothing_else_is_asked_twice():
    q = Choice(instructions="Which team?", criteria=TEAM,
               examples=[Example(state="a", answer="billing"), Example(state="b", answer="sales")])
    flipped = reversed_question(q)
    assert list(flipped.criteria) == ["sales", "technical", "billing"]
    assert [e.state for e in flipped.examples] == ["b", "a"]
    assert reversed_question({"type": "choice", "criteria": TEAM})["criteria"] == dict(reversed(list(TEAM.items())))
    for once in (Noul(instructions="spam?"), {"type": "score", "criteria": ["low", "high"]},
                 {"type": "choice", "criteria": {"only": "one"}}):
        assert reversed_question(once) is None


def test_two_readings_combine_by_their_geometric_mean_in_the_listed_order():
    listed = SystemOneResponse(model="m", usage=Usage(n_calls=2), answers={
        "team": ChoiceAnswer(choice="a", probabilities={"a": 0.6, "b": 0.3, "c": 0.1}, confidence=0.4),
        "spam": NoulAnswer(noul=0.2)})
    flipped = SystemOneResponse(model="m", usage=Usage(n_calls=1), answers={
        "team": ChoiceAnswer(choice="b", probabilities={"c": 0.1, "b": 0.6, "a": 0.3}, confidence=0.4)})
    both = combined(listed, flipped, "peak")
    team = both.answers["team"]
    assert list(team.probabilities) == ["a", "b", "c"]
    assert team.probabilities["a"] == pytest.approx(team.probabilities["b"])  # sqrt(.18) each: a tie
    assert team.choice == "a"  # a tie goes to the first listed
    assert sum(team.probabilities.values()) == pytest.approx(1.0)
    assert both.answers["spam"] == listed.answers["spam"] and both.usage.n_calls == 3
    assert both.debug["orders"] == {"team": {"listed": "a", "reversed": "b"}}


def test_an_order_that_is_not_one_of_the_two_is_refused_at_the_constructor():
    with pytest.raises(ValueError, match="order: must be one of"):
        SystemOneClient(None, model="m", api="chat_completions", order="shuffled")


@pytest.mark.live
def test_reversing_the_users_options_moves_nothing_when_both_orders_are_read(local_server):
    sdk = local_server.client()
    try:
        # one request at a time: requests batched together on the server read slightly different numbers
        client = SystemOneClient(sdk, model=local_server.model, order="both", max_concurrency=1)
        state = "I was charged twice for my subscription, please refund me."
        spam = Noul(instructions="This message is spam.")
        one = client.system_one(state, {"team": Choice(instructions="Which team?", criteria=TEAM), "spam": spam})
        rev = dict(reversed(list(TEAM.items())))
        two = client.system_one(state, {"team": Choice(instructions="Which team?", criteria=rev), "spam": spam})
        once = SystemOneClient(sdk, model=local_server.model, max_concurrency=1).system_one(
            state, {"team": Choice(instructions="Which team?", criteria=TEAM), "spam": spam})
    finally:
        sdk.close()
    # the same two readings whichever order the user lists, up to the server's numbers: a prompt restored from the
    # kept-prompts cache reads a few hundredths apart from one read afresh (seen up to 0.036 on a server other
    # tests used); read as listed only, reversing these options moves billing's probability by about 0.8
    for k in TEAM:
        assert one.answers["team"].probabilities[k] == pytest.approx(two.answers["team"].probabilities[k], abs=0.06)
    assert one.answers["spam"].noul == pytest.approx(once.answers["spam"].noul, abs=0.05)  # a noul is asked once
    assert one.usage.n_calls == once.usage.n_calls + 1  # one more call: the choice reversed
    assert set(one.debug["orders"]) == {"team"}


def test_the_gateway_builds_its_engine_clients_with_the_order_it_was_started_with():
    from jev_shared.gateway.config import Backend, GatewayConfig
    from jev_shared.gateway.engines import EnginePool

    for order in ("listed", "both"):
        pool = EnginePool(GatewayConfig(backends={"m": Backend("http://127.0.0.1:9/v1", "m")}, cache=False,
                                        order=order))
        assert pool.get("m").options.order == order


@pytest.mark.live
def test_jev_decide_order_both_asks_each_choice_twice_and_answers_as_the_library(local_server, capsys):
    import json

    from jev_shared.cli import main

    questions = json.dumps({"team": {"type": "choice", "instructions": "Which team?", "criteria": TEAM}})
    state = "The app crashes when I open settings."
    backend = ["--backend-url", local_server.base_url, "--model", local_server.model]
    counts = {}
    for order in ("listed", "both"):
        assert main(["decide", "--state", state, "--questions", questions, "--order", order, *backend]) == 0
        out = json.loads(capsys.readouterr().out)
        counts[order] = out["usage"]["n_calls"]
        assert set(out["answers"]["team"]["probabilities"]) == set(TEAM)
    assert counts["both"] == counts["listed"] + 1
