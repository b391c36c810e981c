"""Files: an atomic write and an exclusive lock, for the caches several processes share (the memory)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to a private temporary file beside ``path``, synced, then renamed over it: a
    reader sees the old file or the new one, never a torn one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock beside ``path`` (``<name>.lock``) for a read-merge-write, where the platform has flock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the atomic rename alone
        yield
        return
    with open(path.with_name(path.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
