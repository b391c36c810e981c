"""A client the engine built over an HTTP client of its own (``LocalServer.client()``: ``direct.sdk_client`` and
``backend.attach``) is freed with its connections when the caller drops it without closing it.

Was: ``attach`` keyed the Backend value by the SDK's HTTP client in a ``WeakKeyDictionary`` while the value's
``HttpTarget`` held that same HTTP client, so the entry never died: every such client, its pool and its open
sockets lived until the process ended (the ``sys:1: ResourceWarning: unclosed <socket ...>`` lines at the exit
of CI's pytest runs). Now the value sits in that
HTTP client's ``__dict__``: a cycle the garbage collector frees with the client.
"""

from __future__ import annotations

import gc
import warnings
import weakref

import openai
import pytest

from jev_shared import Noul, SystemOneClient
from jev_shared.backend import Backend, attach
from jev_shared.direct import sdk_client

SDKS = [(openai.OpenAI, openai.DefaultHttpxClient), (openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient)]


@pytest.mark.parametrize(("sdk", "http_default"), SDKS, ids=["sync", "async"])
def test_a_marked_client_dropped_unclosed_frees_its_http_client(sdk, http_default) -> None:
    """As ``LocalServer.mark`` builds it; the backend still reaches the client's SDK copies while it lives."""
    client, target = sdk_client(sdk, http_default, "http://127.0.0.1:9/v1", "k")
    backend = Backend(name="embedded-llama.cpp:m", http=target)
    attach(client, backend)
    assert Backend.of(client) is backend and Backend.of(client.with_options(timeout=3.0)) is backend
    sdk_ref, http_ref = weakref.ref(client), weakref.ref(client._client)  # noqa: SLF001 - the SDK's HTTP client
    del client, target, backend
    gc.collect()
    assert sdk_ref() is None
    assert http_ref() is None, "the HTTP client (and its connection pool) outlived its SDK client"


@pytest.mark.slow
def test_a_local_client_dropped_unclosed_releases_its_connection_now(local_server) -> None:
    """A decision on the embedded server, the client dropped without ``close()``: its HTTP client is collected at
    once, and the pooled connection to the server with it (not at the process's exit)."""
    sdk = local_server.client()
    http_ref = weakref.ref(sdk._client)  # noqa: SLF001 - the SDK's HTTP client
    answer = SystemOneClient(sdk, model=local_server.model).system_one("I love it", {"q": Noul(instructions="Positive?")})
    assert "q" in answer.answers
    del sdk, answer
    with warnings.catch_warnings(record=True):  # the connection's socket, collected unclosed, may say so
        warnings.simplefilter("always")
        gc.collect()  # frees the engine's cycles with the SDK client: its weak entry goes, and with it the last
        gc.collect()  # outside reference to the HTTP client's own cycle (client -> Backend -> HttpTarget -> client)
    assert http_ref() is None, "the local client's HTTP client, and its socket to the server, are kept until exit"
