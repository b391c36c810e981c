"""JevRouter: a Runnable that asks which route should handle its input, then invokes that route.

The decision is one ``Choice`` question (route name → description) read as a probability
distribution. It runs as its own child run (``jev_route``), so a trace shows the router, the
decision (with any chat-model call under it) and then the chosen branch, tagged ``route:<name>``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from langchain_core.runnables import RunnableConfig, RunnableLambda, RunnableSerializable
from pydantic import BaseModel, ConfigDict, PrivateAttr

from jev_shared import Choice, ChoiceAnswer, DecisionSets, Example, SystemOneResponse

from ._branches import RouteBranches
from ._checks import check_examples, check_state, check_text, check_threshold
from ._core import Decider, Engine
from ._portable import Travels, examples_json
from ._routes import Route, parse_routes, union
from .errors import RouteConfidenceError
from .review import ask_human

DEFAULT_INSTRUCTIONS = "Which route should handle this input?"
QUESTION_ID = "route"


class RouteDecision(BaseModel):
    """Which route runs, and why: the model's distribution over the routes.

    It compares equal to, hashes as and formats (``f"{d}"``) as its ``route``, so a classifier
    router's output is a LangGraph edge's destination: ``add_conditional_edges(node, router, [...])``.
    """

    model_config = ConfigDict(frozen=True)

    #: The route that runs (the default route when ``defaulted``, the person's pick when ``reviewed``).
    route: str
    #: The model's most probable route.
    choice: str
    probabilities: dict[str, float]
    confidence: float
    #: The readout method that answered (logprobs, grammar, structured, discrete, ratings).
    method: str
    latency_ms: float
    #: True when confidence fell below ``min_confidence`` and the default route took over.
    defaulted: bool = False
    #: True when confidence fell in the "ask a human" band and a person picked the route.
    reviewed: bool = False
    #: The routes in the answer's conformal decision set, most probable first (the router's ``sets`` or the
    #: client's); None without decision sets.
    decision_set: list[str] | None = None
    #: True when that set was not one route, so the ``default`` route took over.
    abstained: bool = False

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return self.route == other
        return super().__eq__(other)

    def __hash__(self) -> int:
        return hash(self.route)

    def __format__(self, format_spec: str) -> str:
        return format(self.route, format_spec)

    def as_metadata(self) -> dict[str, Any]:
        """Flat run metadata for the branch (and everything under it), easy to filter on in a trace."""
        return {"jev_route": self.route, "jev_choice": self.choice, "jev_confidence": self.confidence,
                "jev_probabilities": dict(self.probabilities), "jev_method": self.method,
                "jev_latency_ms": self.latency_ms, "jev_defaulted": self.defaulted, "jev_reviewed": self.reviewed,
                "jev_decision_set": self.decision_set, "jev_abstained": self.abstained}


class JevRouter(RouteBranches, Decider, Travels, RunnableSerializable[Any, Any]):
    """Decide which route handles the input, then invoke that route's branch with the input unchanged.

    >>> router = JevRouter(client, routes={"billing": ("Invoices, refunds and payments", billing_chain),
    ...                                    "tech": ("Bugs, errors and outages", tech_chain)},
    ...                    instructions="Which team should handle this ticket?")
    >>> router.invoke("I was charged twice")   # billing_chain's output
    >>> router.decide("I was charged twice")   # RouteDecision(route="billing", probabilities=..., ...)

    ``client``: a ``SystemOneClient``, an ``AsyncSystemOneClient``, a LangChain chat model or any
    ``BaseDecisionModel``. ``state`` turns the input into what the model reads (default: text, JSON,
    or chat turns as given). Below ``min_confidence`` the ``default`` route runs; without one,
    :class:`RouteConfidenceError`. Between ``min_confidence`` and ``ask_human_below`` a person picks
    (LangGraph's ``interrupt``; resume with a route name). A route without a branch makes the router a
    classifier: its output is the :class:`RouteDecision` (equal to its route name, so the router itself
    is a LangGraph edge), and :meth:`as_edge` is an edge that returns the name alone. With ``sets``
    (:class:`jev_shared.DecisionSets` fitted on labelled answers of this question; or a client given
    ``sets=``), a decision whose set is not one route abstains: the ``default`` route (the named
    fallback branch) runs, ``abstained`` says so.
    ``dumpd``/``dumps`` and pickle work: see :class:`jev_langchain._portable.Travels`.
    """

    client: Any
    routes: dict[str, Route]
    instructions: str = DEFAULT_INSTRUCTIONS
    state: Callable[[Any], Any] | None = None
    default: str | None = None
    min_confidence: float = 0.0
    ask_human_below: float | None = None
    examples: list[Example] | None = None
    sets: DecisionSets | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)
    event: ClassVar[str] = "jev_route"
    question_id: ClassVar[str] = QUESTION_ID

    _engine: Engine = PrivateAttr()

    def __init__(self, client: Any, routes: Any, instructions: str = DEFAULT_INSTRUCTIONS, *,
                 state: Callable[[Any], Any] | None = None, default: str | None = None,
                 min_confidence: float = 0.0, ask_human_below: float | None = None,
                 examples: Sequence[Example] | None = None, sets: DecisionSets | None = None,
                 **kwargs: Any) -> None:
        parsed = parse_routes(routes)
        if sets is not None and not isinstance(sets, DecisionSets):
            raise TypeError(f"sets: expected a DecisionSets, got {type(sets).__name__}")
        check_text("instructions", instructions)
        min_confidence = check_threshold("min_confidence", min_confidence)
        if ask_human_below is not None:
            ask_human_below = check_threshold("ask_human_below", ask_human_below)
        if sets is not None and not sets.applies_to(dict.fromkeys(parsed, 0.0)):
            raise ValueError(f"sets: fitted on the options {sets.options[:5]}, not the routes {list(parsed)[:5]}: "
                             "refit them on this router's answers (jev calibrate)")
        if default is not None and default not in parsed:
            raise ValueError(f"default: {default!r} is not one of the routes {list(parsed)}")
        checked = check_examples(examples, parsed, f"{{answer}} is not one of the routes {list(parsed)}")
        engine = Engine(client, "JevRouter")
        super().__init__(client=client, routes=parsed, instructions=instructions,
                         state=check_state(state), default=default, min_confidence=min_confidence,
                         ask_human_below=ask_human_below, examples=checked, sets=sets, **kwargs)
        self._engine = engine

    def _build_engine(self) -> None:
        self._engine = Engine(self.client, "JevRouter")

    @property
    def lc_attributes(self) -> dict[str, Any]:
        """Routes and examples in the form the constructor takes, so a dump loads back."""
        routes = {n: r.description if r.runnable is None else [r.description, r.runnable]
                  for n, r in self.routes.items()}
        return {"routes": routes, **examples_json(self.examples)}

    # -- the decision ---------------------------------------------------------------------------

    @property
    def question(self) -> Choice:
        """The question the model answers: one option per route, described as given."""
        return Choice(instructions=self.instructions, criteria={n: r.description for n, r in self.routes.items()},
                      examples=self.examples)

    def _question(self) -> Choice:
        return self.question

    def _state_fn(self) -> Callable[[Any], Any] | None:
        return self.state

    def decide(self, input: Any, config: RunnableConfig | None = None) -> RouteDecision:
        """The decision alone, without running any branch."""
        return self._step().invoke(input, config)

    async def adecide(self, input: Any, config: RunnableConfig | None = None) -> RouteDecision:
        return await self._step().ainvoke(input, config)

    def as_edge(self) -> RunnableLambda:
        """The route name alone, for ``graph.add_conditional_edges(node, router.as_edge(), list(router.routes))``."""
        return RunnableLambda(lambda x, config: self.decide(x, config).route,
                              afunc=self._aedge, name="jev_route_edge")

    async def _aedge(self, input: Any, config: RunnableConfig) -> str:
        return (await self.adecide(input, config)).route

    def _interpret(self, input: Any, resp: SystemOneResponse) -> RouteDecision:
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, ChoiceAnswer)
        decision = RouteDecision(route=answer.choice, choice=answer.choice, probabilities=answer.probabilities,
                                 confidence=answer.confidence, method=resp.method_of(QUESTION_ID) or "unknown",
                                 latency_ms=resp.usage.latency_ms)
        silent = resp.no_signal(QUESTION_ID)  # a uniform stand-in: the "first" route would be a guess
        chosen = self.sets.of(answer) if self.sets is not None else answer.decision_set
        if chosen is not None:
            decision = decision.model_copy(update={"decision_set": chosen})
            if len(chosen) != 1 and not silent:
                return self._abstain(decision)
        if answer.confidence >= self.min_confidence and not silent:
            if self.ask_human_below is not None and answer.confidence < self.ask_human_below:
                return _reviewed(decision, list(self.routes))
            return decision
        if self.default is None:
            why = ("no route label was in the model's token window (no signal)" if silent else
                   f"confidence {answer.confidence:.3f} in route {answer.choice!r} is below min_confidence "
                   f"{self.min_confidence}")
            raise RouteConfidenceError(
                f"JevRouter: {why} and there is no default route; set default=<route> or lower min_confidence",
                decision=decision,
            )
        return decision.model_copy(update={"route": self.default, "defaulted": True})

    def _abstain(self, decision: RouteDecision) -> RouteDecision:
        """A decision whose set is not one route: the default route, or RouteConfidenceError without one."""
        if self.default is None:
            raise RouteConfidenceError(
                f"JevRouter: the decision set {decision.decision_set} is not one route and there is no default "
                "route; set default=<route> (the fallback branch)", decision=decision)
        return decision.model_copy(update={"route": self.default, "defaulted": True, "abstained": True})

    # -- the branches' output (running them, their input and config: _branches.py) --------------

    @property
    def OutputType(self) -> Any:  # noqa: N802 - LangChain's name
        """What any branch returns, or the :class:`RouteDecision` for a route without one."""
        return union([r.runnable.OutputType if r.runnable is not None else RouteDecision
                      for r in self.routes.values()])


def _reviewed(decision: RouteDecision, routes: list[str]) -> RouteDecision:
    """An unsure route goes to a person: LangGraph's interrupt, resumed with a route name (or ``{"route": ...}``)."""
    answer = ask_human({"type": "route_review", "suggested": decision.choice, "routes": routes,
                        "probabilities": decision.probabilities, "confidence": decision.confidence,
                        "description": f"JevRouter is unsure ({decision.confidence:.2f}): pick a route"})
    route = answer.get("route") if isinstance(answer, dict) else answer
    if route not in routes:
        raise ValueError(f"JevRouter: the reviewer's answer {answer!r} is not one of the routes {routes}")
    return decision.model_copy(update={"route": route, "reviewed": True})


__all__ = ["JevRouter", "RouteDecision", "Route", "parse_routes", "DEFAULT_INSTRUCTIONS"]
