"""Pickling the router, the gate, the guard and the decision model: what travels, and what is rebuilt.

A component keeps its engine (the clients it asks) beside its fields; the engine holds a connection
pool and locks, so it is left out of the pickle and rebuilt from ``client`` when unpickled. The
client travels as it is when it pickles. A LangChain object that does not (``ChatOpenAI`` holds an
``openai.OpenAI``; ``.with_retry()`` / ``.with_fallbacks()`` / ``.configurable_fields()`` hold such a
model) travels as its constructor call: the fields that were set, without the excluded ones that do
not pickle (its SDK clients, which its constructor makes again). An engine client
(``SystemOneClient``) cannot travel: it holds a live connection pool, a local model server's handle
and a decision memory; :func:`portable_client` says so by name.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel

from jev_shared import AsyncSystemOneClient, SystemOneClient


def _pickles(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:  # noqa: BLE001 - any failure means "does not travel as it is"
        return False
    return True


class _Rebuilt:
    """A pydantic object that travels as its constructor call (``cls(**kwargs)`` when unpickled)."""

    def __init__(self, cls: type[BaseModel], kwargs: dict[str, Any]) -> None:
        self.cls, self.kwargs = cls, kwargs

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return _construct, (self.cls, self.kwargs)


def _construct(cls: type[BaseModel], kwargs: dict[str, Any]) -> BaseModel:
    return cls(**kwargs)


def _portable(value: Any) -> Any:
    """``value``, or (for a pydantic object that does not pickle) its constructor call; nested alike
    (in lists, dicts, dataclasses such as a router's routes, and the fields of a rebuilt object)."""
    if isinstance(value, list):
        return [_portable(v) for v in value]
    if isinstance(value, dict):
        return {k: _portable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # a Route and its branch
        return dataclasses.replace(value, **{f.name: _portable(getattr(value, f.name))
                                             for f in dataclasses.fields(value) if f.init})
    if not isinstance(value, BaseModel) or _pickles(value):
        return value
    fields = type(value).model_fields
    kwargs = {}
    for name in sorted(value.model_fields_set & set(fields)):
        field, item = fields[name], _portable(getattr(value, name))
        if field.exclude and not _pickles(item):
            continue  # an SDK client, a lock: its constructor makes a new one
        kwargs[field.alias or name] = item
    return _Rebuilt(type(value), kwargs)


def portable_client(client: Any, owner: str) -> Any:
    """The client as it travels in a pickle of ``owner``; a clear error for one that cannot travel."""
    if isinstance(client, (SystemOneClient, AsyncSystemOneClient)):
        raise TypeError(
            f"{owner} cannot be pickled with a {type(client).__name__}: an engine client holds a live connection "
            "pool, a local model server's handle and a decision memory, which do not travel between processes; "
            "build it where it runs, or pass a LangChain chat model (e.g. ChatOpenAI(logprobs=True)) as client=")
    return _portable(client)


class Travels:
    """LangChain serialisation and pickling for a pydantic component whose engine is built from ``client``.

    ``dumpd`` / ``dumps`` give its constructor (id ``["jev_langchain", <class>]``): its settings, and the
    client as LangChain serialises it (a chat model's credentials as secret ids, from its own
    ``lc_secrets``; the components hold none). ``load`` rebuilds it with
    ``valid_namespaces=["jev_langchain"]``. An engine client is no LangChain object: it is dumped as
    ``not_implemented``, and such a dump does not load. A pickle leaves the engine out and rebuilds it.
    """

    @classmethod
    def is_lc_serializable(cls) -> bool:
        return True

    @classmethod
    def get_lc_namespace(cls) -> list[str]:
        return ["jev_langchain"]

    def _build_engine(self) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict[str, Any]:
        state: dict[str, Any] = cast(BaseModel, super()).__getstate__()
        fields = {k: portable_client(v, type(self).__name__) if k == "client" else _portable(v)
                  for k, v in state["__dict__"].items()}
        return {**state, "__dict__": fields, "__pydantic_private__": {}}

    def __setstate__(self, state: dict[str, Any]) -> None:
        cast(BaseModel, super()).__setstate__(state)
        self._build_engine()


def examples_json(examples: list[Any] | None) -> dict[str, Any]:
    """Few-shot examples as constructor kwargs a dump can carry (plain JSON), or nothing."""
    return {} if examples is None else {"examples": [e.model_dump(mode="json") for e in examples]}


__all__ = ["portable_client", "Travels", "examples_json"]
