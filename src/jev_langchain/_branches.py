"""What JevRouter does once a route is chosen: run that route's branch (invoke, stream, sync and async) as a
child run tagged ``route:<name>`` with the decision in its metadata, and describe the branches' input and config."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.runnables import Runnable, RunnableConfig
from langchain_core.runnables.utils import ConfigurableFieldSpec, get_unique_config_specs
from langchain_core.utils.pydantic import TypeBaseModel

from ._core import child_config
from ._routes import Route, union

if TYPE_CHECKING:
    _Runnable = Runnable[Any, Any]
else:
    _Runnable = object


class RouteBranches(_Runnable):
    """Mixed in before the Runnable: the router gives ``routes``, ``decide`` and ``adecide``; a decision whose
    route has no branch (a classifier's) is the output itself."""

    if TYPE_CHECKING:
        routes: dict[str, Route]

        def decide(self, input: Any, config: RunnableConfig | None = None) -> Any: ...

        async def adecide(self, input: Any, config: RunnableConfig | None = None) -> Any: ...

    def _branch(self, decision: Any, run_manager: Any, config: RunnableConfig
                ) -> tuple[Runnable[Any, Any] | None, RunnableConfig]:
        """The chosen branch and its child config: tagged ``route:<name>``, the decision in its metadata."""
        child = child_config(config, run_manager, f"route:{decision.route}")
        child["metadata"] = {**child.get("metadata", {}), **decision.as_metadata()}
        return self.routes[decision.route].runnable, child

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return self._call_with_config(self._invoke, input, config, **kwargs)

    def _invoke(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig,
                **kwargs: Any) -> Any:
        decision = self.decide(input, child_config(config, run_manager, "jev:decide"))
        branch, child = self._branch(decision, run_manager, config)
        return decision if branch is None else branch.invoke(input, child, **kwargs)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        return await self._acall_with_config(self._ainvoke, input, config, **kwargs)

    async def _ainvoke(self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig,
                       **kwargs: Any) -> Any:
        decision = await self.adecide(input, child_config(config, run_manager, "jev:decide"))
        branch, child = self._branch(decision, run_manager, config)
        return decision if branch is None else await branch.ainvoke(input, child, **kwargs)

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        """Decide first, then stream the chosen branch (a classifier route yields the decision)."""
        yield from self._transform_stream_with_config(iter([input]), self._stream, config, **kwargs)

    def _stream(self, inputs: Iterator[Any], run_manager: CallbackManagerForChainRun, config: RunnableConfig,
                **kwargs: Any) -> Iterator[Any]:
        input = next(inputs)
        decision = self.decide(input, child_config(config, run_manager, "jev:decide"))
        branch, child = self._branch(decision, run_manager, config)
        if branch is None:
            yield decision
            return
        yield from branch.stream(input, child, **kwargs)

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        async def one() -> AsyncIterator[Any]:
            yield input

        async for chunk in self._atransform_stream_with_config(one(), self._astream, config, **kwargs):
            yield chunk

    async def _astream(self, inputs: AsyncIterator[Any], run_manager: AsyncCallbackManagerForChainRun,
                       config: RunnableConfig, **kwargs: Any) -> AsyncIterator[Any]:
        input = await anext(inputs)
        decision = await self.adecide(input, child_config(config, run_manager, "jev:decide"))
        branch, child = self._branch(decision, run_manager, config)
        if branch is None:
            yield decision
            return
        async for chunk in branch.astream(input, child, **kwargs):
            yield chunk

    # -- schemas --------------------------------------------------------------------------------

    @property
    def InputType(self) -> Any:  # noqa: N802 - LangChain's name
        """What the branches take (the input reaches them unchanged); Any when a route is a classifier's."""
        branches = [r.runnable for r in self.routes.values()]
        if any(b is None for b in branches):
            return Any
        return union([b.InputType for b in branches if b is not None])

    def get_input_schema(self, config: RunnableConfig | None = None) -> TypeBaseModel:
        """The first branch's input schema that names a type (as ``RunnableBranch`` does), so ``as_tool`` works."""
        for route in self.routes.values():
            if route.runnable is not None and route.runnable.get_input_jsonschema(config).get("type") is not None:
                return route.runnable.get_input_schema(config)
        return super().get_input_schema(config)

    @property
    def config_specs(self) -> list[ConfigurableFieldSpec]:
        return get_unique_config_specs(
            spec for r in self.routes.values() if r.runnable is not None for spec in r.runnable.config_specs
        )


__all__ = ["RouteBranches"]
