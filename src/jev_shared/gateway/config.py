"""The gateway's configuration: which models it serves, who may call it, and its limits.

Plain dataclasses, no web framework: the CLI builds one, tests build one, ``create_app`` reads it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openai

from .. import openai_client
from ..files import read_text
from .kept_states import MAX_KEPT_BYTES
from .sets import Calibration

#: Hosts that count as loopback for "no keys, loopback only".
LOOPBACK_NAMES = ("localhost",)


@dataclass(frozen=True)
class Backend:
    """One model the gateway serves: an OpenAI-compatible server and the model name to ask it for."""

    base_url: str
    model: str
    api_key: str = "unused"
    #: The engine surface toward the backend. Chat Completions is the one every OpenAI-compatible
    #: server speaks with logprobs; "auto" would spend scout calls on a first request.
    api: str = "chat_completions"
    #: The embedded ``LocalServer`` behind it, if any: its clients then carry what ``srv.client()``'s do
    #: (the server's tokenizer, a name that outlives its port, its kept prompts), so the CLI and the
    #: gateway answer as the library does.
    server: Any = field(default=None, compare=False, repr=False)

    def sdk_client(self) -> tuple[Any, Any]:
        """An ``openai.AsyncOpenAI`` toward this backend (no SDK retries: the engine retries) over the SDK's httpx
        client, whose requests the engine posts directly (``openai_client``) over :func:`backend_posts` where it
        can, past the SDK's request machinery and httpx's both; and that (None: httpx), for the caller to close."""
        http = openai.DefaultAsyncHttpxClient()
        posts = backend_posts(self.base_url, http)
        if self.server is not None:
            return self.server.async_client(max_retries=0, http_client=http, posts=posts), posts
        return openai_client(self.base_url, self.api_key, asynchronous=True, max_retries=0, http_client=http,
                             posts=posts), posts


def backend_posts(base_url: str, http: Any) -> Any:
    """What the engine posts a backend's requests with: one aiohttp session (``backend_posts.AiohttpPosts``, sending
    ``http``'s own headers), about a fifth of the CPU per post of the SDK's httpx client (``python -m bench post_instructions``:
    0.46 M instructions against 2.15 M). An aiohttp session belongs for good to the event loop it was opened on: a
    gateway worker has one loop for its life, so the gateway may; the engine's own async clients keep httpx, since a
    user may drive one from more than one loop. None (httpx then) without aiohttp, and for a ``base_url`` with
    credentials in it (``user:password@``): httpx sends them as Basic auth, aiohttp refuses a URL's credentials
    beside an Authorization header."""
    parts = urlsplit(base_url)
    if parts.username is not None or parts.password is not None:
        return None
    try:
        from .backend_posts import AiohttpPosts
    except ImportError:  # aiohttp is the serve extra's
        return None
    return AiohttpPosts(http.headers)


@dataclass
class GatewayConfig:
    """Everything ``create_app`` needs. ``api_keys`` empty means: no authentication (loopback only).

    Every limit has its error (docs/gateway.md lists them): a request over one is refused before
    any backend call.
    """

    backends: dict[str, Backend]
    api_keys: frozenset[str] = frozenset()
    #: Request bodies over this many bytes are refused with 413.
    max_body_bytes: int = 1_000_000
    #: Questions in one request; more are refused with 422 ``too_many_questions``.
    max_questions: int = 64
    #: Requests answered at once; one more is refused with 429 and Retry-After.
    max_in_flight: int = 64
    #: Backend calls one key may hold in flight (a request holds min(questions, max_concurrency));
    #: a request that would go past it is refused with 429 ``key_overloaded``.
    max_calls_per_key: int = 64
    #: Open client connections and requests (uvicorn's ``limit_concurrency``); one more is answered 503 by
    #: uvicorn and closed. Per client address, and headers' time: the reverse proxy's (examples/deploy/).
    max_connections: int = 256
    #: Seconds a client has to send a request's body, from its head; then 408 and the connection is closed.
    body_timeout_s: float = 30.0
    #: Seconds an idle keep-alive connection stays open.
    keep_alive_s: float = 5.0
    #: Without keys, Host headers accepted besides the loopback names (a DNS-rebinding page sends its own).
    allowed_hosts: frozenset[str] = frozenset()
    #: The whole request's bound when the request sets none (seconds), and the most it may ask for.
    default_timeout_s: float = 60.0
    max_timeout_s: float = 300.0
    #: The engine's readout. "auto" learns per model (logprobs, else structured JSON) and remembers;
    #: "logprobs" pins it for backends known to return logprobs (vLLM, SGLang, llama.cpp).
    method: str = "auto"
    #: "both": each choice also asked with its options reversed, the readings combined; "auto": so for a choice with
    #: examples on a backend that asks for it (the engine's ``order``).
    order: str = "auto"
    #: Engine defaults per request; a request's own options override them.
    layout: str = "state_last"
    max_concurrency: int = 8
    top_logprobs: int = 20
    #: The engine's retries of transient backend faults (429, 5xx, connection errors).
    max_retries: int = 3
    #: Retry-After (seconds) when the gateway itself is full, or a throttling backend named none.
    retry_after_s: int = 1
    #: What the engine learns lives in the per-user cache (``Memory.user_cache()``; ``$JEV_NO_CACHE=1``
    #: or ``cache=False`` keep it in this process only).
    cache: bool = True
    #: Questions to prepare at start-up (``--warm``): ``/healthz`` says ready once they are.
    warm: dict[str, Any] | None = None
    #: ``--calibration FILE`` (:func:`.sets.load_calibration`): its calibration replaces the shipped one, and
    #: its decision sets put ``decision_set`` and ``abstains`` on the answers they apply to. None: neither.
    calibration: Calibration | None = None
    #: ``--keep-states FILE`` (:mod:`.kept_states`): each answered request's state, a line per question, for
    #: ``jev calibrate``; None keeps nothing. The file stops growing at ``keep_states_max_bytes``.
    keep_states: Path | None = None
    keep_states_max_bytes: int = MAX_KEPT_BYTES

    @property
    def auth_required(self) -> bool:
        return bool(self.api_keys)

    def host_allowed(self, host_header: str | None) -> bool:
        """With keys, any Host; without, only loopback names (any port) and ``allowed_hosts``."""
        if self.auth_required:
            return True
        if not host_header:
            return False
        host = host_header.strip().lower()
        name = host[1:host.index("]")] if host.startswith("[") and "]" in host else host.rsplit(":", 1)[0]
        return is_loopback(name) or host in self.allowed_hosts or name in self.allowed_hosts


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and localhost; anything else (0.0.0.0 included) is reachable from outside."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: The largest key file read (a regular file only; larger, or /dev/zero, a FIFO: ``FileReadError``, an OSError).
MAX_KEY_FILE_BYTES = 1024 * 1024


def load_keys(key_file: str | os.PathLike[str] | None = None, env: str = "JEV_API_KEYS") -> frozenset[str]:
    """Keys from ``$JEV_API_KEYS`` (comma-separated) and a key file (one a line; ``#`` at a line's start or after a
    space begins a comment). A key with a space, a control character or a ``#`` inside (``abc#def``: a key, or
    ``abc`` and a comment?) is not read as it is meant, and a key file with no key in it would leave the
    gateway open: each is a ``ValueError`` naming the file and the line (never the key)."""
    keys: set[str] = set()
    for n, raw in enumerate(os.environ.get(env, "").split(","), 1):
        if raw.strip():
            keys.add(_key(raw.strip(), f"${env}, key {n}"))
    if key_file:
        where = os.fspath(key_file)
        found = 0
        for n, line in enumerate(read_text(key_file, MAX_KEY_FILE_BYTES).splitlines(), 1):
            line = _COMMENT.split(line, 1)[0].strip()
            if "#" in line:
                raise ValueError(f"{where}:{n}: a key with '#' inside; a comment starts at a line's '#' or at one "
                                 "after a space, so a key may not hold one")
            if line:
                keys.add(_key(line, f"{where}:{n}"))
                found += 1
        if not found:
            raise ValueError(f"{where}: no key in it (every line is blank or a comment); a key file that names no "
                             "key would serve without authentication")
    return frozenset(keys)


#: A comment: ``#`` at the start of a line or after white space (``key  # ops``).
_COMMENT = re.compile(r"(?:^|\s)#")


def _key(key: str, where: str) -> str:
    """``key`` as given, or a ValueError naming ``where`` (not the key: it is a secret) when it cannot authenticate."""
    if any(c.isspace() or not c.isprintable() for c in key):
        raise ValueError(f"{where}: a key with a space or a control character inside can never be sent in an "
                         "Authorization header as it is; one key a line (or comma-separated in $JEV_API_KEYS)")
    return key


@lru_cache(maxsize=1024)
def key_id(key: str) -> str:
    """A short, non-reversible name for a key, safe for logs: which caller, never the key."""
    return hashlib.sha256(key.encode()).hexdigest()[:8]
