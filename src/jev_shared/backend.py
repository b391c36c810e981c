"""Backend: what the engine knows about where a client sends, as one frozen value.

Built once: ``Backend.of(client)`` reads the value attached to the client (``attach``, which
``LocalServer.client()`` and ``served.for_server`` call), or, for a client nobody described, an empty one;
``SystemOneClient(..., backend=Backend(...))`` passes one outright. The value is kept beside the client,
keyed by the SDK's own HTTP client as well, which ``with_options()`` and ``copy()`` share: so an SDK copy
keeps its backend (the gateway's per-timeout copies need no re-marking).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from .direct import HttpTarget

if TYPE_CHECKING:
    from .calls import Call, Reply

Tokenize = Callable[[str], list[int]]
#: ``text -> (id, text of that token)`` pairs, by the server's own tokenizer (llama.cpp's ``with_pieces``)
Pieces = Callable[[str], list[tuple[int, str]]]


class KeptPrompts(Protocol):
    """A server's kept prompts, as the clients use them (:class:`~jev_shared.local.slots.SlotCache`): they wrap the
    transport's send, and once a call's flows have ended they settle what it left pending (its own I/O)."""

    #: whether a prompt waits to be kept: :meth:`settle` has work
    pending: bool

    def wrap(self, send: Callable[[Call], Reply], firsts: list[Call] | None = None) -> Callable[[Call], Reply]: ...

    def awrap(self, asend: Callable[[Call], Awaitable[Reply]],
              firsts: list[Call] | None = None) -> Callable[[Call], Awaitable[Reply]]: ...

    def settle(self) -> None: ...


_ATTACHED: weakref.WeakKeyDictionary[Any, Backend] = weakref.WeakKeyDictionary()
#: where a client that takes no weak reference (a SimpleNamespace) keeps its value, in its own __dict__
_SLOT = "__jev_backend__"


def fingerprint(*parts: Any) -> str:
    """A short stable hash of JSON-able parts: how prompts and backends are named in memory."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Backend:
    """Everything the engine need not discover about a backend; every field has the plain-client default."""

    #: a stable name for the memory (LocalServer's ``embedded-llama.cpp:<model>``: its port changes every start);
    #: None: the client's base URL names it
    name: str | None = None
    #: the per-question surfaces to use, taken at their word (no discovery); None: every one the client has
    surfaces: tuple[str, ...] | None = None
    #: the server's own tokenizer (``text -> ids``), for token counts and the exact readout
    tokenize: Tokenize | None = None
    #: the same tokenizer with each token's text, so a prefix every remaining name shares is known without a call
    #: (readon.py); None: each shared token is read by a call
    pieces: Pieces | None = None
    #: the server's kept prompts (a :class:`~jev_shared.local.slots.SlotCache`), or None
    slots: KeptPrompts | None = None
    #: cache policy: learn into the per-user memory file (``Memory.user_cache()``) rather than a fresh memory
    user_cache: bool = False
    #: the server reads every label's own first token (llama.cpp's logit_bias + post-sampling probs: exact.py)
    exact_readout: bool = False
    #: under order="auto", a choice with examples is asked in both orders (orders.py): a second reading costs this
    #: backend a cached prompt and no money (LocalServer: the embedded model's answers move with the examples' order)
    orders: bool = False
    #: the model default for content-free debiasing under debias="auto"; None: the model's own (models.py)
    debias: bool | None = None
    #: the HTTP client the engine built its SDK client over, with its base URL and headers (``LocalServer.client()``):
    #: the transport posts a surface's route with it directly (direct.py); None: through the SDK client's ``post``
    http: HttpTarget | None = None

    @classmethod
    def of(cls, client: Any) -> Backend:
        """The value attached to ``client`` (or to the SDK HTTP client it shares with its copies), else ``Backend()``."""
        for key in (client, getattr(client, "_client", None)):
            if key is None:
                continue
            found = _lookup(key)
            if found is not None:
                return found
        return cls()

    def fingerprint(self, client: Any) -> str:
        """Where ``client`` points: this backend's name, else the base URL without credentials, query or fragment."""
        if self.name:
            return fingerprint("named", self.name)
        base = getattr(client, "base_url", None)
        if base is None:
            return fingerprint("type", type(client).__module__, type(client).__qualname__)
        url = urlsplit(str(base))
        host = url.hostname or ""
        netloc = f"{host}:{url.port}" if url.port else host
        return fingerprint("url", url.scheme, netloc, url.path.rstrip("/"))


def _lookup(key: Any) -> Backend | None:
    try:
        found = _ATTACHED.get(key)
    except TypeError:  # takes no weak reference
        found = None
    if found is None:
        found = vars(key).get(_SLOT) if hasattr(key, "__dict__") else None
    return found if isinstance(found, Backend) else None


def attach(client: Any, backend: Backend) -> Any:
    """Describe ``client`` (and, for an SDK client, every copy of it) by ``backend``; returns ``client``."""
    for key in (client, getattr(client, "_client", None)):
        if key is None:
            continue
        if backend.http is not None and backend.http.http is key and hasattr(key, "__dict__"):
            # the value holds its own key (the HTTP client it posts with): as a weak key it would never be released,
            # nor its pool's sockets until the process ends; in the key's __dict__ it is a cycle the collector frees
            vars(key)[_SLOT] = backend
            _ATTACHED.pop(key, None)
            continue
        try:
            _ATTACHED[key] = backend
        except TypeError:
            vars(key)[_SLOT] = backend
    return client


def describe(client: Any, **changes: Any) -> Any:
    """Attach ``Backend.of(client)`` with ``changes`` (field names of :class:`Backend`); returns ``client``."""
    return attach(client, dataclasses.replace(Backend.of(client), **changes))


__all__ = ["Backend", "KeptPrompts", "Pieces", "Tokenize", "attach", "describe", "fingerprint"]
