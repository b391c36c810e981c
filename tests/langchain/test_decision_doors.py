"""The LangChain doors with decision sets and data-chosen bands: the guard and the gate take a
target and labelled answers and choose allow / ask / block from them; the router sends an abstaining
decision to its named fallback route."""

from __future__ import annotations

import pytest
from langchain_core.runnables import RunnableLambda

from jev_langchain import GateBlocked, JevGate, JevRouter, RouteConfidenceError, ToolCallGuard
from jev_shared import DecisionSets

from .fakes import FIRST, SECOND, TIE, fake_client

#: Sure and right at 0.9 and 0.1, a coin toss at 0.5: max_error=0.05 allows from 0.9, blocks at 0.1 and below.
LABELLED = [(0.9, True)] * 100 + [(0.1, False)] * 100 + [(0.5, True), (0.5, False)] * 50


def test_guard_chooses_its_band_from_labelled_answers():
    guard = ToolCallGuard(fake_client(FIRST), labelled=LABELLED, max_error=0.05)
    assert guard.threshold == pytest.approx(0.9) and guard.block_below == pytest.approx(0.1)
    assert guard.band is not None and guard.band.ask_rate == pytest.approx(1 / 3)
    assert "expected ask rate 33.3%" in str(guard.band)
    windows = {"first": FIRST, "tie": TIE, "second": SECOND}
    outcomes = {name: ToolCallGuard(fake_client(w), labelled=LABELLED, max_error=0.05).check("rm", {"p": 1}).outcome
                for name, w in windows.items()}
    assert outcomes == {"first": "allow", "tie": "review", "second": "block"}


def test_guard_by_ask_rate_and_refusals():
    guard = ToolCallGuard(fake_client(FIRST), labelled=LABELLED, ask_rate=0.3)
    assert guard.band is not None and guard.band.ask_rate == pytest.approx(1 / 3)  # the ties at 0.5 go together
    with pytest.raises(ValueError, match="need labelled"):
        ToolCallGuard(fake_client(FIRST), max_error=0.05)
    with pytest.raises(ValueError, match="needs a target"):
        ToolCallGuard(fake_client(FIRST), labelled=LABELLED)


def test_gate_allows_asks_and_blocks_by_its_fitted_band():
    asked = []
    ask = RunnableLambda(lambda x: asked.append(x) or "asked a person")

    def gate(window):
        return JevGate(fake_client(window), "The message is a genuine question.", labelled=LABELLED,
                       max_error=0.05, on_ask=ask)

    assert gate(FIRST).invoke("hello") == "hello"
    assert gate(TIE).invoke("hmm") == "asked a person" and asked == ["hmm"]
    with pytest.raises(GateBlocked):
        gate(SECOND).invoke("spam")
    decision = gate(TIE).decide("hmm")
    assert decision.outcome == "ask" and not decision.allowed and decision.threshold == pytest.approx(0.9)
    with pytest.raises(GateBlocked, match="ask band"):  # on_ask="block" (default): asked goes the blocked way
        JevGate(fake_client(TIE), "The message is a genuine question.", labelled=LABELLED, max_error=0.05
                ).invoke("hmm")


def router(window, **kw) -> JevRouter:
    return JevRouter(fake_client(window), {"billing": ("Invoices", RunnableLambda(lambda x: "billing")),
                                           "tech": ("Bugs", RunnableLambda(lambda x: "tech")),
                                           "human": ("Anything else", RunnableLambda(lambda x: "human"))}, **kw)


def test_router_sends_an_abstaining_decision_to_the_fallback_route():
    sets = DecisionSets({"*": 0.3}, coverage=0.9, n=200)
    sure = router({"A": -0.05, "B": -4.0, "C": -4.0}, sets=sets, default="human")
    d = sure.decide("charged twice")
    assert d.route == "billing" and d.decision_set == ["billing"] and not d.abstained
    torn = router({"A": -0.7, "B": -0.7, "C": -5.0}, sets=sets, default="human")
    d = torn.decide("charged twice, app crashed")
    assert d.route == "human" and d.abstained and d.decision_set == ["billing", "tech"]
    assert torn.invoke("charged twice, app crashed") == "human"
    with pytest.raises(RouteConfidenceError, match="not one route"):
        router({"A": -0.7, "B": -0.7, "C": -5.0}, sets=sets).decide("x")


def test_router_refuses_sets_fitted_on_other_options():
    """Sets fitted on another question's options would name routes that do not exist: refused at construction."""
    other = DecisionSets({"*": 0.3}, coverage=0.9, n=200, options=["billing", "tech", "sales"])
    with pytest.raises(ValueError, match="sets: fitted on the options"):
        router({"A": -0.05, "B": -4.0, "C": -4.0}, sets=other)
    same = DecisionSets({"*": 0.3}, coverage=0.9, n=200, options=["tech", "human", "billing"])
    assert router({"A": -0.05, "B": -4.0, "C": -4.0}, sets=same).decide("x").decision_set == ["billing"]
