"""What every ``jev`` command that asks a model shares: the backend flags, the backend itself
(a configured OpenAI-compatible server, or the embedded model), reading JSON arguments, and the
one-line install hint for a missing extra.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from jev_shared import openai_client
from jev_shared.files import MAX_READ_BYTES, FileReadError
from jev_shared.files import read_text as read_file
from jev_shared.gateway.config import Backend

from .checks import text, url

#: How to get every extra the commands need: the package is not on PyPI, so from the checkout (README).
INSTALL_HINT = "pip install -e '.[serve,local]' from the jev checkout (the package is not on PyPI)"


class MissingExtra(SystemExit):
    """A command's optional dependency is not installed: one line on stderr with the install hint, exit 2."""

    def __init__(self, command: str, what: str, extra: str) -> None:
        print(f"jev {command}: {what} is not installed (the {extra!r} extra); install it with: {INSTALL_HINT}",
              file=sys.stderr)
        super().__init__(2)


def add_backend_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend-url", type=url, help="an OpenAI-compatible base URL (e.g. http://gpu:8000/v1); "
                                         "without it, the embedded model (LocalServer()) is started")
    p.add_argument("--model", action="append", default=None, type=text,
                   help="the backend's model name (repeat to serve several on one backend); without "
                        "--backend-url, the embedded model to start: qwen2.5-coder-1.5b (default), "
                        "qwen2.5-coder-0.5b (the qwen extra; half the latency) or smollm2-135m")
    p.add_argument("--backend-api", default="chat_completions", choices=("chat_completions", "responses", "auto"),
                   help="the engine surface toward the backend")
    p.add_argument("--no-cache", action="store_true",
                   help="keep what the engine learns in this process only, not in the per-user cache "
                        "(also: JEV_NO_CACHE=1)")


def shown_url(url: str) -> str:
    """``url`` fit for a message: no ``user:password@``, no query or fragment (a token may ride there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def memory(args: argparse.Namespace) -> Any:
    """The engine's memory for a command: the per-user cache, unless ``--no-cache`` (or JEV_NO_CACHE=1)."""
    from jev_shared import Memory

    return Memory() if getattr(args, "no_cache", False) else Memory.user_cache()


def backends(args: argparse.Namespace, stack: ExitStack, command: str = "decide") -> dict[str, Backend]:
    """The configured backend, or the embedded model started inside ``stack`` (a missing model: exit 2)."""
    if args.backend_url:
        if not args.model:
            print(f"jev {command}: --backend-url needs --model NAME (see jev {command} --help)", file=sys.stderr)
            raise SystemExit(2)
        key = os.environ.get("JEV_BACKEND_API_KEY") or os.environ.get("OPENAI_API_KEY") or "unused"
        return {m: Backend(args.backend_url, m, key, args.backend_api) for m in args.model}
    from jev_shared.local import DEFAULT_MODEL, LocalModelError, LocalServer

    try:
        keep = False if getattr(args, "no_cache", False) else None  # --no-cache: no kept prompts either
        model = args.model[0] if args.model else DEFAULT_MODEL
        srv = stack.enter_context(LocalServer(model, prompt_cache=keep))
    except LocalModelError as exc:
        print(f"jev {command}: the embedded model cannot start ({exc}); pass --backend-url URL --model NAME, "
              f"or install it: {INSTALL_HINT}", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"jev: embedded model {srv.model} at {srv.base_url}", file=sys.stderr)
    return {srv.model: Backend(srv.base_url, srv.model, "local", args.backend_api, server=srv)}


def sync_client(backend: Backend) -> Any:
    """An ``openai.OpenAI`` client toward ``backend`` (``LocalServer.client()``'s where it is embedded), which the
    engine posts with directly, as the gateway's and the library's own clients are."""
    return backend.server.client() if backend.server is not None else openai_client(backend.base_url, backend.api_key)


def read_text(value: str) -> str:
    """``-`` is stdin, ``@file`` a file, anything else the text itself. A file or stdin is read bounded
    (``MAX_READ_BYTES``) and a file must be a regular one: else ``FileReadError``, an OSError."""
    if value == "-":
        text = sys.stdin.read(MAX_READ_BYTES + 1)
        if len(text) > MAX_READ_BYTES:
            raise FileReadError(f"stdin: larger than {MAX_READ_BYTES:,} bytes; not read")
        return text
    if value.startswith("@"):
        return read_file(value[1:])
    return value


def read_state(value: str) -> Any:
    """Text stays text; a JSON object, list or chat turns is parsed."""
    text = read_text(value)
    if text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def read_questions(value: str) -> Any:
    """A JSON object id -> question, inline or in a file."""
    text = value if value.lstrip().startswith("{") else read_file(value)
    return json.loads(text)
