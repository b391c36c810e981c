"""From what a user hands a component (engine client, OpenAI-style client, LlamaIndex LLM) to a ClientPair.

Selectors and the node filter take the same three doors, so the resolution lives in one place:
``resolve_clients`` builds the engine clients, ``client_pair`` checks them into the engine's
``ClientPair``, which then runs every call (sync, async, or sync on a worker thread).
"""

from __future__ import annotations

import inspect
from typing import Any

from llama_index.core.settings import Settings

from jev_shared import AsyncSystemOneClient, ClientPair, SystemOneClient

from .llm import system_one_clients


def _is_async_create(client: Any) -> bool:
    """An ``async def create`` (seen through decorators such as the openai SDK's) marks an async client."""
    create = getattr(getattr(getattr(client, "chat", None), "completions", None), "create", None)
    return create is not None and inspect.iscoroutinefunction(inspect.unwrap(create))


def resolve_clients(
    client: Any = None,
    *,
    async_client: Any = None,
    llm: Any = None,
    model: str | None = None,
    **client_kwargs: Any,
) -> tuple[SystemOneClient | None, AsyncSystemOneClient | None]:
    """(sync, async) engine clients from whichever door the user used.

    ``client`` / ``async_client``: a ``SystemOneClient`` / ``AsyncSystemOneClient``, or any
    OpenAI-compatible client (then ``model`` is required); ``client`` counts as async when its
    ``create`` is an ``async def``, ``async_client`` always does.
    ``llm``: a LlamaIndex LLM, serving both. Nothing at all: ``Settings.llm``, as LlamaIndex's
    own selectors do.
    """
    if llm is not None and (client is not None or async_client is not None):
        raise ValueError("pass either llm= or client=/async_client=, not both")
    if llm is None and client is None and async_client is None:
        llm = Settings.llm
    if llm is not None:
        if model is not None:
            client_kwargs["model"] = model
        return system_one_clients(llm, **client_kwargs)
    sync, async_ = None, None
    for given, is_async in ((client, _is_async_create(client)), (async_client, True)):
        if given is None:
            continue
        if isinstance(given, SystemOneClient):
            sync = given
        elif isinstance(given, AsyncSystemOneClient):
            async_ = given
        elif model is None:
            raise ValueError(f"model: a model name is required to wrap a {type(given).__name__} client")
        elif is_async:
            async_ = AsyncSystemOneClient(given, model=model, **client_kwargs)
        else:
            sync = SystemOneClient(given, model=model, **client_kwargs)
    return sync, async_


def client_pair(sync: Any, async_: Any, owner: str) -> ClientPair:
    """The engine's ``ClientPair`` for a component's constructor, with this package's messages.

    The constructors take engine clients only (``from_defaults`` wraps the rest), so a wrong type
    says where to go, and no client at all is a ``ValueError`` as it always was here.
    """
    if sync is None and async_ is None:
        raise ValueError(f"{owner}: pass a client (client=, async_client= or llm=)")
    for given, kind in ((sync, SystemOneClient), (async_, AsyncSystemOneClient)):
        if given is not None and not isinstance(given, kind):
            raise TypeError(
                f"{owner}: expected a {kind.__name__}, got {type(given).__name__}; "
                f"{owner}.from_defaults(client=..., model=...) wraps other clients"
            )
    return ClientPair(sync, async_, owner=owner)
