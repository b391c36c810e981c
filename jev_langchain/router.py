"""JevRouter: a Runnable that asks which route should handle its input, then invokes that route.

The decision is one ``Choice`` question (route name → description) read as a probability
distribution. It runs as its own child run (``jev_route``), so a trace shows the router, the
decision (with any chat-model call under it) and then the chosen branch, tagged ``route:<name>``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from langchain_core.runnables.config import patch_config
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from pydantic import BaseModel, ConfigDict, PrivateAttr

from jev_shared import Choice, ChoiceAnswer, Example, SystemOneResponse

from ._core import Backend, aannounce, announce, check_text, check_threshold, step
from .errors import RouteConfidenceError

DEFAULT_INSTRUCTIONS = "Which route should handle this input?"
#: The System One limit on a choice's options.
MAX_ROUTES = 255
QUESTION_ID = "route"


@dataclass(frozen=True)
class Route:
    """One route: what it is for (shown to the model) and the branch that handles it (None: classify only)."""

    description: str
    runnable: Runnable[Any, Any] | None = None


class RouteDecision(BaseModel):
    """Which route runs, and why: the model's distribution over the routes."""

    model_config = ConfigDict(frozen=True)

    #: The route that runs (the default route when ``defaulted``).
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

    def as_metadata(self) -> dict[str, Any]:
        """Flat run metadata for the branch (and everything under it), easy to filter on in a trace."""
        return {"jev_route": self.route, "jev_choice": self.choice, "jev_confidence": self.confidence,
                "jev_probabilities": dict(self.probabilities), "jev_method": self.method,
                "jev_latency_ms": self.latency_ms, "jev_defaulted": self.defaulted}


def parse_routes(routes: Any) -> dict[str, Route]:
    """``{name: description | (description, branch)}`` or ``[(name, description[, branch]), ...]`` → routes."""
    if isinstance(routes, Mapping):
        items = [(name, spec) for name, spec in routes.items()]
    elif isinstance(routes, Sequence) and not isinstance(routes, str):
        items = []
        for item in routes:
            if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
                raise TypeError(f"routes: each item must be (name, description) or (name, description, branch), "
                                f"got {item!r}")
            items.append((item[0], tuple(item[1:])))
    else:
        raise TypeError(f"routes: expected a mapping of name -> description or (description, branch), got "
                        f"{type(routes).__name__}")
    if not items:
        raise ValueError("routes: at least one route is required")
    if len(items) > MAX_ROUTES:
        raise ValueError(f"routes: at most {MAX_ROUTES} routes, got {len(items)}")
    parsed: dict[str, Route] = {}
    seen: set[str] = set()
    for name, spec in items:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"routes: route names must be non-empty strings, got {name!r}")
        if name.strip() in seen:
            raise ValueError(f"routes: duplicate route name {name.strip()!r}")
        seen.add(name.strip())
        parsed[name] = _parse_route(name, spec)
    return parsed


def _parse_route(name: str, spec: Any) -> Route:
    if isinstance(spec, str):
        spec = (spec,)
    if not isinstance(spec, (tuple, list)) or len(spec) not in (1, 2):
        raise TypeError(f"routes[{name!r}]: expected a description or (description, branch), got {spec!r}")
    description, branch = spec[0], (spec[1] if len(spec) == 2 else None)
    if not isinstance(description, str) or not description.strip():
        raise ValueError(f"routes[{name!r}]: the description must be a non-empty string, got {description!r}")
    if branch is None or isinstance(branch, Runnable):
        return Route(description, branch)
    if callable(branch):
        return Route(description, RunnableLambda(branch))
    raise TypeError(f"routes[{name!r}]: the branch must be a Runnable or a callable, got {type(branch).__name__}")


def _union(types: list[Any]) -> Any:
    unique: list[Any] = []
    for t in types:
        if t is Any:
            return Any
        if t not in unique:
            unique.append(t)
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007 - built at run time


class JevRouter(RunnableSerializable[Any, Any]):
    """Decide which route handles the input, then invoke that route's branch with the input unchanged.

    >>> router = JevRouter(client, routes={"billing": ("Invoices, refunds and payments", billing_chain),
    ...                                    "tech": ("Bugs, errors and outages", tech_chain)},
    ...                    instructions="Which team should handle this ticket?")
    >>> router.invoke("I was charged twice")   # billing_chain's output
    >>> router.decide("I was charged twice")   # RouteDecision(route="billing", probabilities=..., ...)

    ``client`` is a ``SystemOneClient``, an ``AsyncSystemOneClient`` or a LangChain chat model.
    ``state`` turns the input into what the model reads (default: text, JSON, or chat turns as given).
    Below ``min_confidence`` the ``default`` route runs; without one, :class:`RouteConfidenceError`.
    A route given without a branch makes the router a classifier: its output is the :class:`RouteDecision`.
    """

    client: Any
    routes: dict[str, Route]
    instructions: str = DEFAULT_INSTRUCTIONS
    state: Callable[[Any], Any] | None = None
    default: str | None = None
    min_confidence: float = 0.0
    examples: list[Example] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _backend: Backend = PrivateAttr()

    def __init__(self, client: Any, routes: Any, instructions: str = DEFAULT_INSTRUCTIONS, *,
                 state: Callable[[Any], Any] | None = None, default: str | None = None,
                 min_confidence: float = 0.0, examples: Sequence[Example] | None = None, **kwargs: Any) -> None:
        parsed = parse_routes(routes)
        check_text("instructions", instructions)
        min_confidence = check_threshold("min_confidence", min_confidence)
        if default is not None and default not in parsed:
            raise ValueError(f"default: {default!r} is not one of the routes {list(parsed)}")
        if state is not None and not callable(state):
            raise TypeError(f"state: expected a callable that turns the input into a state, got {type(state).__name__}")
        checked = _check_examples(examples, parsed)
        backend = Backend(client, "JevRouter")
        super().__init__(client=client, routes=parsed, instructions=instructions, state=state,  # type: ignore[call-arg]
                         default=default, min_confidence=min_confidence, examples=checked, **kwargs)
        self._backend = backend

    # -- the decision ---------------------------------------------------------------------------

    @property
    def question(self) -> Choice:
        """The question the model answers: one option per route, described as given."""
        return Choice(instructions=self.instructions, criteria={n: r.description for n, r in self.routes.items()},
                      examples=self.examples)

    def decide(self, input: Any, config: RunnableConfig | None = None) -> RouteDecision:
        """The decision alone, without running any branch."""
        return self._step().invoke(input, config)

    async def adecide(self, input: Any, config: RunnableConfig | None = None) -> RouteDecision:
        return await self._step().ainvoke(input, config)

    def _step(self) -> RunnableLambda:
        return step("jev_route", self._decide, self._adecide)

    def _decide(self, input: Any, config: RunnableConfig) -> RouteDecision:
        decision = self._decision(self._backend.ask(input, self.state, {QUESTION_ID: self.question}))
        announce("jev_route", decision, config)
        return decision

    async def _adecide(self, input: Any, config: RunnableConfig) -> RouteDecision:
        decision = self._decision(await self._backend.aask(input, self.state, {QUESTION_ID: self.question}))
        await aannounce("jev_route", decision, config)
        return decision

    def _decision(self, resp: SystemOneResponse) -> RouteDecision:
        answer = resp.answers[QUESTION_ID]
        assert isinstance(answer, ChoiceAnswer)
        method = resp.method_of(QUESTION_ID) or "unknown"
        decision = RouteDecision(route=answer.choice, choice=answer.choice, probabilities=answer.probabilities,
                                 confidence=answer.confidence, method=method, latency_ms=resp.usage.latency_ms)
        silent = resp.no_signal(QUESTION_ID)  # a uniform stand-in: the "first" route would be a guess
        if answer.confidence >= self.min_confidence and not silent:
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

    # -- running the branch ---------------------------------------------------------------------

    def _branch(self, decision: RouteDecision, run_manager: Any, config: RunnableConfig
                ) -> tuple[Runnable[Any, Any] | None, RunnableConfig]:
        """The chosen branch and its child config: tagged ``route:<name>``, the decision in its metadata."""
        child = patch_config(config, callbacks=run_manager.get_child(tag=f"route:{decision.route}"))
        child["metadata"] = {**child.get("metadata", {}), **decision.as_metadata()}
        return self.routes[decision.route].runnable, child

    def _decision_config(self, run_manager: Any, config: RunnableConfig) -> RunnableConfig:
        return patch_config(config, callbacks=run_manager.get_child(tag="jev:decide"))

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(self._invoke, input, config, **kwargs)

    def _invoke(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig,
                **kwargs: Any) -> Any:
        decision = self.decide(input, self._decision_config(run_manager, config))
        branch, child = self._branch(decision, run_manager, config)
        return decision if branch is None else branch.invoke(input, child, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    async def _ainvoke(self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig,
                       **kwargs: Any) -> Any:
        decision = await self.adecide(input, self._decision_config(run_manager, config))
        branch, child = self._branch(decision, run_manager, config)
        return decision if branch is None else await branch.ainvoke(input, child, **kwargs)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """Decide first, then stream the chosen branch (a classifier route yields the decision)."""
        yield from self._transform_stream_with_config(iter([input]), self._stream, config, **kwargs)

    def _stream(self, inputs: Iterator[Any], run_manager: CallbackManagerForChainRun, config: RunnableConfig,
                **kwargs: Any) -> Iterator[Any]:
        input = next(inputs)
        decision = self.decide(input, self._decision_config(run_manager, config))
        branch, child = self._branch(decision, run_manager, config)
        if branch is None:
            yield decision
        else:
            yield from branch.stream(input, child, **kwargs)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        async def one() -> AsyncIterator[Any]:
            yield input

        async for chunk in self._atransform_stream_with_config(one(), self._astream, config, **kwargs):
            yield chunk

    async def _astream(self, inputs: AsyncIterator[Any], run_manager: AsyncCallbackManagerForChainRun,
                       config: RunnableConfig, **kwargs: Any) -> AsyncIterator[Any]:
        input = await anext(inputs)
        decision = await self.adecide(input, self._decision_config(run_manager, config))
        branch, child = self._branch(decision, run_manager, config)
        if branch is None:
            yield decision
        else:
            async for chunk in branch.astream(input, child, **kwargs):
                yield chunk

    # -- schemas --------------------------------------------------------------------------------

    @property
    def InputType(self) -> Any:  # noqa: N802 - LangChain's name
        """What the branches take (the input reaches them unchanged); Any when a route is a classifier's."""
        branches = [r.runnable for r in self.routes.values()]
        if any(b is None for b in branches):
            return Any
        return _union([b.InputType for b in branches if b is not None])

    @property
    def OutputType(self) -> Any:  # noqa: N802 - LangChain's name
        """What any branch returns, or the :class:`RouteDecision` for a route without one."""
        return _union([r.runnable.OutputType if r.runnable is not None else RouteDecision
                       for r in self.routes.values()])

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        return get_unique_config_specs(
            spec for r in self.routes.values() if r.runnable is not None for spec in r.runnable.config_specs
        )


def _check_examples(examples: Sequence[Example] | None, routes: Mapping[str, Route]) -> list[Example] | None:
    """Few-shot examples must answer with a route name; checked now, not at the first request."""
    if examples is None:
        return None
    checked = []
    for i, ex in enumerate(examples):
        ex = ex if isinstance(ex, Example) else Example.model_validate(ex)
        if ex.answer not in routes:
            raise ValueError(f"examples[{i}].answer: {ex.answer!r} is not one of the routes {list(routes)}")
        checked.append(ex)
    return checked


__all__ = ["JevRouter", "RouteDecision", "Route", "parse_routes", "DEFAULT_INSTRUCTIONS"]
