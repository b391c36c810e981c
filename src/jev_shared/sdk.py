"""``openai_client``: an openai client the engine posts with directly, toward any OpenAI-compatible server.

``LocalServer.client()`` builds its clients this way; this is the same for a server the engine did not start
(vLLM, SGLang, a hosted API, the gateway's backends): the SDK client over an HTTP client of its own, described
so the engine posts a route's JSON body with that HTTP client and skips the SDK's request machinery (direct.py:
about 40% of a one-question decision's CPU). The client stays a plain openai client for everything else.
"""

from __future__ import annotations

from typing import Any

from .backend import describe
from .direct import sdk_client


def openai_client(base_url: str, api_key: str, *, asynchronous: bool = False, **kwargs: Any) -> Any:
    """``openai.OpenAI`` (``openai.AsyncOpenAI`` when ``asynchronous``) toward ``base_url``, posted with directly.

    ``kwargs`` go to the SDK; with any option besides ``timeout``, ``max_retries`` and ``http_client`` (headers,
    a query, an organisation) the client keeps the SDK's post, since only the SDK knows what those change."""
    import openai

    if asynchronous:
        client, target = sdk_client(openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient, base_url, api_key, **kwargs)
    else:
        client, target = sdk_client(openai.OpenAI, openai.DefaultHttpxClient, base_url, api_key, **kwargs)
    return client if target is None else describe(client, http=target)
