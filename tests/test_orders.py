"""order="both": a choice asked with its options as listed and reversed (a yes/no with examples: its examples
reversed), combined so the order cannot move it; order="auto" (the default): so for a choice asked with examples,
on a backend that says a second reading is cheap."""

from __future__ import annotations

import pytest

from jev_shared import Choice, ChoiceAnswer, Example, Noul, NoulAnswer, SystemOneClient, SystemOneResponse, Usage
from jev_shared.orders import combined, reversed_question
from tests.helpers import provider, windows

TEAM = {"billing": "Payments, charges and refunds", "technical": "Bugs, crashes and errors",
        "sales": "Quotes, pricing and new plans"}


def test_a_choice_reverses_its_options_and_its_own_examples_and_nothing_else_is_asked_twice():
    q = Choice(instructions="Which team?", criteria=TEAM,
               examples=[Example(state="a", answer="billing"), Example(state="b", answer="sales")])
    flipped = reversed_question(q)
    assert list(flipped.criteria) == ["sales", "technical", "billing"]
    assert [e.state for e in flipped.examples] == ["b", "a"]
    assert reversed_question({"type": "choice", "criteria": TEAM})["criteria"] == dict(reversed(list(TEAM.items())))
    for once in (Noul(instructions="spam?"), Noul(instructions="spam?", examples=[Example(state="a", answer=True)]),
                 {"type": "score", "criteria": ["low", "high"]}, {"type": "choice", "criteria": {"only": "one"}}):
        assert reversed_question(once) is None


def test_a_yes_no_with_examples_reverses_its_examples():
    shots = [Example(state="a", answer=False), Example(state="b", answer=True)]
    assert [e.state for e in reversed_question(Noul(instructions="spam?", examples=shots)).examples] == ["b", "a"]
    wire = {"type": "noul", "instructions": "spam?", "examples": [{"state": "a", "answer": False},
                                                                  {"state": "b", "answer": True}]}
    assert [e["state"] for e in reversed_question(wire)["examples"]] == ["b", "a"]


def test_two_readings_combine_by_their_geometric_mean_in_the_listed_order():
    listed = SystemOneResponse(model="m", usage=Usage(n_calls=2), debug={"prior_calls": {"team": 2, "spam": 3}}, answers={
        "team": ChoiceAnswer(choice="a", probabilities={"a": 0.6, "b": 0.3, "c": 0.1}, confidence=0.4),
        "spam": NoulAnswer(noul=0.2)})
    flipped = SystemOneResponse(model="m", usage=Usage(n_calls=1), debug={"prior_calls": {"team": 2}}, answers={
        "team": ChoiceAnswer(choice="b", probabilities={"c": 0.1, "b": 0.6, "a": 0.3}, confidence=0.4)})
    both = combined(listed, flipped, "peak")
    team = both.answers["team"]
    assert list(team.probabilities) == ["a", "b", "c"]
    assert team.probabilities["a"] == pytest.approx(team.probabilities["b"])  # sqrt(.18) each: a tie
    assert team.choice == "a"  # a tie goes to the first listed
    assert sum(team.probabilities.values()) == pytest.approx(1.0)
    assert both.answers["spam"] == listed.answers["spam"] and both.usage.n_calls == 3
    # a yes/no read both ways: the geometric mean of P(true) against that of P(false)
    flipped.answers["spam"] = NoulAnswer(noul=0.6)
    spam = combined(listed, flipped, "peak").answers["spam"]
    assert spam.noul == pytest.approx((0.2 * 0.6) ** 0.5 / ((0.2 * 0.6) ** 0.5 + (0.8 * 0.4) ** 0.5))
    assert both.debug["orders"] == {"team": {"listed": "a", "reversed": "b"}}
    assert both.debug["prior_calls"] == {"team": 4, "spam": 3}  # the reversed prompt's priors counted too


def _asked(body: dict) -> tuple[list[str], list[str]]:
    """(the options as the system message lists them, the example states in the order they are shown)."""
    system = body["messages"][0]["content"]
    options = [k for k in TEAM if f"\n{k}:" in system]
    options.sort(key=lambda k: system.index(f"\n{k}:"))
    shown = [m["content"].rsplit("\n", 1)[-1] for m in body["messages"][1:-1] if m["role"] == "user"]
    return options, shown


def test_auto_asks_a_choice_with_examples_in_both_orders_with_every_example_reversed():
    """The client's example, the call's and the question's own: the second request shows all three, reversed, and
    lists the options reversed; the zero-shot noul beside it is asked once."""
    fake = provider(windows([("billing", -0.2), ("technical", -2.0), ("sales", -3.0), ("yes", -0.3), ("no", -1.5)]),
                    orders=True)
    client = SystemOneClient(fake, model="m", debias=False,
                             examples={"team": [Example(state="client", answer="billing")]})
    team = Choice(instructions="Which team?", criteria=TEAM, examples=[Example(state="own", answer="sales")])
    resp = client.system_one("x", {"team": team, "spam": Noul(instructions="spam")},
                             examples={"team": [Example(state="call", answer="technical")]})
    asked = [_asked(b) for b in fake.wire.bodies if "Which team?" in b["messages"][0]["content"]]
    assert asked == [(["billing", "technical", "sales"], ["client", "call", "own"]),
                     (["sales", "technical", "billing"], ["own", "call", "client"])]
    assert len(fake.wire) == 3 and set(resp.debug["orders"]) == {"team"}


@pytest.mark.parametrize("orders, examples, order, calls", [
    (True, False, "auto", 1),   # zero-shot: asked once (both orders gained within noise there)
    (False, True, "auto", 1),   # a backend that does not say so (a hosted model: a second call costs money)
    (True, True, "listed", 1),
    (False, False, "both", 2),  # asked for: always
])
def test_auto_asks_once_where_it_does_not_pay(orders, examples, order, calls):
    fake = provider(windows([("billing", -0.2), ("technical", -2.0), ("sales", -3.0)]), orders=orders)
    shots = [Example(state="a", answer="billing"), Example(state="b", answer="technical")] if examples else None
    SystemOneClient(fake, model="m", debias=False, order=order).system_one(
        "x", {"team": Choice(instructions="Which team?", criteria=TEAM, examples=shots)})
    assert len(fake.wire) == calls


@pytest.mark.parametrize("order, examples, calls", [("both", 2, 2), ("both", 1, 1), ("both", 0, 1), ("auto", 2, 1)])
def test_both_asks_a_yes_no_with_examples_with_them_reversed_too(order, examples, calls):
    """Two examples or more: the second request shows them in reverse order; one or none: asked once. ``auto`` asks a
    yes/no once (on six public yes/no sets both ways did not pay: docs/benchmarks.md)."""
    fake = provider(windows([("yes", -0.3), ("no", -1.5)]), orders=True)
    shots = [Example(state="calm", answer=False), Example(state="loud", answer=True)][:examples] or None
    resp = SystemOneClient(fake, model="m", debias=False, order=order).system_one(
        "x", {"spam": Noul(instructions="This is spam.", examples=shots)})
    assert len(fake.wire) == calls
    shown = [[m["content"].rsplit("\n", 1)[-1] for m in b["messages"][1:-1] if m["role"] == "user"]
             for b in fake.wire.bodies]
    # the two readings go concurrently: either may reach the wire first
    assert sorted(shown) == ([["calm", "loud"], ["loud", "calm"]] if calls == 2 else [["calm", "loud"][:examples]])
    assert ("orders" in resp.debug) == (calls == 2)


def test_an_order_that_is_not_one_of_the_three_is_refused_at_the_constructor():
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
    assert one.answers["spam"].noul == pytest.approx(once.answers["spam"].noul, abs=0.05)  # zero-shot: asked once
    assert one.usage.n_calls == once.usage.n_calls + 1  # one more call: the choice reversed
    assert set(one.debug["orders"]) == {"team"}


@pytest.mark.live
def test_by_default_the_embedded_model_reads_a_choice_with_examples_in_both_orders(local_server):
    """order="auto": the examples' order and the options' order, both reversed by the user, move nothing."""
    shots = [Example(state="My card was billed twice.", answer="billing"),
             Example(state="The app crashes on start.", answer="technical"),
             Example(state="How much is the premium plan?", answer="sales")]
    state = "I was charged twice for my subscription, please refund me."
    sdk = local_server.client()
    try:
        client = SystemOneClient(sdk, model=local_server.model, max_concurrency=1)
        one = client.system_one(state, {"team": Choice(instructions="Which team?", criteria=TEAM, examples=shots)})
        rev = Choice(instructions="Which team?", criteria=dict(reversed(list(TEAM.items()))), examples=shots[::-1])
        two = client.system_one(state, {"team": rev})
    finally:
        sdk.close()
    assert set(one.debug["orders"]) == {"team"} == set(two.debug["orders"])
    for k in TEAM:
        assert one.answers["team"].probabilities[k] == pytest.approx(two.answers["team"].probabilities[k], abs=0.06)


def test_the_gateway_builds_its_engine_clients_with_the_order_it_was_started_with():
    from jev_shared.gateway.config import Backend, GatewayConfig
    from jev_shared.gateway.engines import EnginePool

    assert GatewayConfig(backends={}).order == "auto"
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
