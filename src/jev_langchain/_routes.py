"""Route specs: what a user writes for ``routes=`` and the checked form the router keeps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

from langchain_core.runnables import Runnable, RunnableLambda

from jev_shared import MAX_CHOICE_OPTIONS


@dataclass(frozen=True)
class Route:
    """One route: what it is for (shown to the model) and the branch that handles it (None: classify only)."""

    description: str
    runnable: Runnable[Any, Any] | None = None


def parse_routes(routes: Any) -> dict[str, Route]:
    """``{name: description | (description, branch) | Route}`` or ``[(name, description[, branch]), ...]`` → routes.

    Parsed routes parse again unchanged, so ``configurable_fields`` can rebuild the router.
    """
    if isinstance(routes, Mapping):
        items = list(routes.items())
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
    if len(items) > MAX_CHOICE_OPTIONS:
        raise ValueError(f"routes: at most {MAX_CHOICE_OPTIONS} routes, got {len(items)}")
    parsed: dict[str, Route] = {}
    for name, spec in items:
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"routes: route names must be non-empty strings, got {name!r}")
        if name.strip() in {n.strip() for n in parsed}:
            raise ValueError(f"routes: duplicate route name {name.strip()!r}")
        parsed[name] = spec if isinstance(spec, Route) else _parse_route(name, spec)
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


def union(types: list[Any]) -> Any:
    """One type for several (a Union of the distinct ones; Any absorbs all)."""
    unique: list[Any] = []
    for t in types:
        if t is Any:
            return Any
        if t not in unique:
            unique.append(t)
    return unique[0] if len(unique) == 1 else Union[tuple(unique)]  # noqa: UP007 - built at run time
