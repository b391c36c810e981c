"""Served engines (vLLM, SGLang): their tokenizer, asked over HTTP, so the labels' own tokens are read.

Both servers answer ``POST /tokenize`` at their root (beside ``/v1``) with ``{"prompt": text,
"add_special_tokens": false}`` → ``{"tokens": [...], "count": n, "max_model_len": m}`` (vLLM's
``TokenizeCompletionRequest``; SGLang's ``TokenizeRequest``, native API page). The engine asks it once per
answer word (:class:`~jev_shared.exact.TokenTable` keeps the ids), never per question.

    SystemOneClient(openai.OpenAI(base_url="http://gpu:8000/v1", api_key="-"), model="Qwen/Qwen2.5-Coder-1.5B-Instruct",
                    api="vllm")  # the client is set up by for_server (attach)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from . import backend
from .backend import Backend
from .calls import planning_time_left
from .errors import ClientCapabilityError
from .surfaces.sglang import SGLANG
from .surfaces.vllm import VLLM

#: The served engines whose surfaces read the labels' own token ids.
SERVED = (VLLM, SGLANG)


def server_tokenizer(client: Any) -> Callable[[str], list[int]]:
    """``text -> token ids`` by the server's own ``/tokenize``, through the SDK client's ``post`` (its key,
    its transport). A client without ``post`` and ``base_url`` is refused by name."""
    post, base = getattr(client, "post", None), getattr(client, "base_url", None)
    if not callable(post) or base is None:
        raise ClientCapabilityError(f"{type(client).__name__} has no post() and base_url to reach the server's "
                                    "/tokenize; pass an openai.OpenAI client pointed at the server's /v1")
    url = str(base).rstrip("/").removesuffix("/v1") + "/tokenize"

    def tokenize(text: str) -> list[int]:
        left = planning_time_left()  # the call's deadline bounds its tokenizer's requests too
        options = {} if left is None else {"options": {"timeout": left}}
        body = post(url, body={"prompt": text, "add_special_tokens": False}, cast_to=object, **options)
        tokens = body["tokens"] if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in tokens):
            raise ValueError(f"{url} did not answer a list of token ids")
        return tokens

    return tokenize


def for_server(client: Any, api: str) -> Any:
    """``client`` (an openai SDK client at a vLLM or SGLang server) set up for ``api``: its surfaces, its
    server's tokenizer, and the labels' own tokens read (the surface says how: surfaces/vllm.py, surfaces/sglang.py)."""
    if api not in SERVED:
        raise ClientCapabilityError(f"api={api!r} is not a served engine; use one of {list(SERVED)}")
    known = Backend.of(client)
    return backend.attach(client, dataclasses.replace(known, tokenize=server_tokenizer(client), exact_readout=True,
                                                      surfaces=(api,)))


def attach(client: Any, api: str) -> Any:
    """What the engine does with ``api="vllm"`` / ``"sglang"``: :func:`for_server` on an SDK client that has no
    tokenizer yet; any other client (or api) as it is (its window is read)."""
    has_http = callable(getattr(client, "post", None)) and getattr(client, "base_url", None) is not None
    if api in SERVED and has_http and Backend.of(client).tokenize is None:
        return for_server(client, api)
    return client


__all__ = ["SERVED", "attach", "for_server", "server_tokenizer"]
