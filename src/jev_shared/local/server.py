"""The llama.cpp server an embedded model runs in: in-process, on a free loopback port."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
import urllib.request
from pathlib import Path
from typing import Any

from ..backend import Backend, attach
from ..calls import planning_time_left
from ..direct import HttpTarget, sdk_client
from ..files import caching_off, memory_file
from .models import DEFAULT_MODEL, INSTALL_LOCAL, MODELS, LocalModelError


def _prompt_folder(setting: bool | str | os.PathLike[str] | None, model: str) -> Path | None:
    if setting is None:
        setting = not caching_off()
    if setting is False:
        return None
    if setting is not True:
        return Path(setting)
    return memory_file().parent / "slots" / model  # the prompts are kept beside the memory


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: Parallel slots a server starts with: on the 2-core machine with the 1.5B, 1, 2 and 4 slots gave 1.42, 1.34 and 1.54
#: decisions a second at concurrency = slots (bare calls of the same requests 1.25, 1.15, 1.48; load 2.2,
#: ``python -m bench slots_throughput``): no fewer helps, and each slot holds a kept prompt of its own (slots.py).
N_PARALLEL = 4


class LocalServer:
    """Start llama.cpp's server (from ``xllamacpp``) in a background thread; stop it on exit."""

    def __init__(self, model: str = DEFAULT_MODEL, *, n_ctx: int | None = None, n_parallel: int = N_PARALLEL,
                 n_threads: int | None = None, quiet: bool = True,
                 prompt_cache: bool | str | os.PathLike[str] | None = None) -> None:
        if model not in MODELS:
            raise LocalModelError(f"unknown local model {model!r}; choose one of {sorted(MODELS)}")
        self.spec = MODELS[model]
        self.model = self.spec.name
        self.n_ctx = n_ctx or self.spec.n_ctx
        self.n_parallel = n_parallel
        self.n_threads = n_threads or int(os.environ.get("JEV_LOCAL_THREADS") or 0) or threads_for_machine()
        self.quiet = quiet
        #: Where questions' prompts (their examples too) are kept as the server's own KV cache (:mod:`slots`), or None:
        #: None (the default) is ``slots/<model>`` beside the memory file unless JEV_NO_CACHE, False none,
        #: a path that folder.
        self.prompt_folder = _prompt_folder(prompt_cache, self.model)
        self._slots: Any = None
        self._server: Any = None
        self.base_url = ""

    def start(self) -> LocalServer:
        try:
            import xllamacpp  # pyright: ignore[reportMissingImports]  # the 'local' extra
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
        # The GGUF's own Jinja chat template (Qwen's needs it); unknown template kwargs such as
        # enable_thinking=False are ignored by templates that do not use them.
        params.use_jinja = True
        if self.quiet:
            params.verbosity = -1
        if self.prompt_folder is not None:
            self.prompt_folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            params.slot_save_path = str(self.prompt_folder) + os.sep  # llama.cpp appends the file name as is
        self._server = xllamacpp.Server(params)
        self.base_url = f"http://127.0.0.1:{params.port}/v1"
        if self.prompt_folder is not None:
            from .slots import SlotCache

            self._slots = SlotCache(self.base_url, self.prompt_folder, self.n_parallel)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout_s: float = 60.0) -> None:
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
        if self._slots is not None and self._server is not None:
            self._slots.settle()  # a prompt a failed call left pending is kept before the server goes
        self._server = None  # the server shuts down when the object is released

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self, **kwargs: Any) -> Any:
        """An ``openai.OpenAI`` client pointed at this server, marked with what the engine need not discover, over
        an HTTP client of its own that the engine posts with directly (direct.py: the SDK's CPU per call saved)."""
        import openai

        return self.mark(*sdk_client(openai.OpenAI, openai.DefaultHttpxClient, self.base_url, "local", **kwargs))

    def async_client(self, **kwargs: Any) -> Any:
        import openai

        return self.mark(*sdk_client(openai.AsyncOpenAI, openai.DefaultAsyncHttpxClient, self.base_url, "local",
                                     **kwargs))

    def mark(self, client: Any, http: HttpTarget | None = None) -> Any:
        """llama.cpp's Responses route carries no logprobs: the engine goes to Chat Completions at once
        (no Responses try, no scout), counts tokens with the server's own tokenizer, reads every
        label's own first token rather than the top-20 window (:mod:`exact`), and keeps what it
        learns in the per-user cache under a name that outlives this server's port; zero-shot prompts
        are kept as the server's own KV cache, so a new process does not read them again (:mod:`slots`);
        ``http`` (else the one ``client`` has): the HTTP client the engine posts with directly (direct.py)."""
        return attach(client, dataclasses.replace(self.backend, http=http or Backend.of(client).http))

    @property
    def backend(self) -> Backend:
        """What the engine knows about this server, attached to its clients (and their SDK copies) by :meth:`mark`."""
        # llama.cpp reads the labels' own tokens, not a window (exact.py)
        return Backend(name=self.backend_name, surfaces=("chat_completions",), tokenize=self.tokenize,
                       pieces=self.pieces, slots=self._slots, user_cache=True, exact_readout=True,
                       orders=True)

    @property
    def slots(self) -> Any:
        """The server's kept prompts (a :class:`~jev_shared.local.slots.SlotCache`), or None when caching is off."""
        return self._slots

    @property
    def backend_name(self) -> str:
        """What the engine's memory knows this server by: the model, not the port it got this time."""
        return f"embedded-llama.cpp:{self.model}"

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` in the model's own tokenizer (llama.cpp's ``/tokenize``)."""
        return [t if isinstance(t, int) else t["id"] for t in self._tokens(text, pieces=False)]

    def pieces(self, text: str) -> list[tuple[int, str]]:
        """(id, text) of each token of ``text``; a token that is part of a character has its bytes' text ('')."""
        return [(t["id"], t["piece"] if isinstance(t["piece"], str) else "") for t in self._tokens(text, pieces=True)]

    def _tokens(self, text: str, *, pieces: bool) -> list[Any]:
        body = json.dumps({"content": text, "with_pieces": pieces}).encode()
        req = urllib.request.Request(self.base_url.removesuffix("/v1") + "/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=planning_time_left(10.0)) as r:  # within a call: its deadline
            return list(json.loads(r.read())["tokens"])


#: Threads per llama.cpp server on a machine this busy (docs/decisions.md). Measured on the 2-core test
#: machine with Qwen 0.5B (``python -m bench limit --threads 1,2``): at a load average of 1.0, 2 threads decided
#: in 307 ms against 642 ms for 1; idle, 133 against 234 ms; with both cores busy elsewhere, 2 threads
#: were 3-4x slower than 1 (a thread waits at each barrier for a descheduled peer). So: every core
#: until the load average says all are taken, then one fewer per busy core; at least 1, at most 8.
MAX_THREADS = 8


def threads_for_machine(cores: int | None = None, load: float | None = None) -> int:
    """cores − round(load) + 1 (one thread may share a core with one other job), 1..min(cores, MAX_THREADS)."""
    cores = cores or os.cpu_count() or 2
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # not on every platform
            load = 1.0
    return max(1, min(MAX_THREADS, cores, cores - int(load + 0.5) + 1))
