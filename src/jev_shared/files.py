"""Files: every file the engine and its commands read, read one bounded way; the caches' atomic write and lock;
the per-user cache folder they live in.

:func:`read_bytes` / :func:`read_text` open without blocking (a FIFO never hangs the process), accept
regular files only (``/dev/zero``, a FIFO, a directory are refused) and read at most ``limit`` bytes
(default :data:`MAX_READ_BYTES`), raising :class:`FileReadError` (an ``OSError``: one line naming the
file and why). ``follow_symlinks=False`` refuses a symlink too: the caches' own files never follow one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: The most bytes read from one file: questions, a state, a key file, the memory (a runaway file fails, not the
#: process's memory).
MAX_READ_BYTES = 64 * 1024 * 1024
#: How long a save waits for another process's lock on the memory file before giving up (a warning).
LOCK_TIMEOUT_S = 30.0


class FileReadError(OSError):
    """A file that is not read: not a regular file, a symlink where none is followed, or over the limit."""


def open_regular(path: str | os.PathLike[str], *, follow_symlinks: bool = True) -> int:
    """A read-only descriptor on ``path``, a regular file (FileReadError otherwise); never blocks on a FIFO."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_symlinks:
        flags |= getattr(os, "O_NOFOLLOW", 0)
        if Path(path).is_symlink():  # where O_NOFOLLOW is missing (Windows)
            raise FileReadError(f"{os.fspath(path)}: is a symlink; it is not followed")
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_symlinks and Path(path).is_symlink():
            raise FileReadError(f"{os.fspath(path)}: is a symlink; it is not followed") from None
        raise exc from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "not a regular file"
        raise FileReadError(f"{os.fspath(path)}: is {kind}; expected a regular file")
    return fd


def read_bytes(path: str | os.PathLike[str], limit: int = MAX_READ_BYTES, *, follow_symlinks: bool = True) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes, else :class:`FileReadError`."""
    fd = open_regular(path, follow_symlinks=follow_symlinks)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise FileReadError(f"{os.fspath(path)}: larger than {limit:,} bytes; not read")
    return data


def read_text(path: str | os.PathLike[str], limit: int = MAX_READ_BYTES, *, follow_symlinks: bool = True) -> str:
    """:func:`read_bytes` as UTF-8 (a file that is not: FileReadError naming the byte)."""
    data = read_bytes(path, limit, follow_symlinks=follow_symlinks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileReadError(f"{os.fspath(path)}: not UTF-8 (byte {exc.start})") from None


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
def file_lock(path: Path, timeout_s: float = LOCK_TIMEOUT_S) -> Iterator[None]:
    """An exclusive lock beside ``path`` (``<name>.lock``, ``filelock``'s, on every platform) for a
    read-merge-write. A lock path that is a symlink is refused (FileReadError), never followed: the
    cache never creates a file outside its own; another holder past ``timeout_s`` is a TimeoutError."""
    from filelock import FileLock

    lock = path.with_name(path.name + ".lock")
    if lock.is_symlink():
        raise FileReadError(f"{lock}: is a symlink; the cache's lock never follows one")
    with FileLock(lock, timeout=timeout_s):
        yield


# --- the per-user cache folder: assembled models, the memory file and kept prompts (one place) ----------------
# ``$JEV_CACHE_DIR``, else the platform's per-user cache folder (``platformdirs``); ``$JEV_MEMORY_FILE`` moves the
# memory file alone; ``$JEV_NO_CACHE=1`` keeps what the engine learns in the process only.

#: Set to 1 (or true/yes) to keep what the engine learns in the process only: no memory file, no prompt files.
NO_CACHE_ENV = "JEV_NO_CACHE"


def caching_off() -> bool:
    return os.environ.get(NO_CACHE_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def memory_file() -> Path:
    """Where the per-user memory lives (``Memory.user_cache()``): ``$JEV_MEMORY_FILE``, else
    ``memory.json`` in :func:`cache_dir`."""
    return Path(os.environ.get("JEV_MEMORY_FILE") or cache_dir() / "memory.json")


def cache_dir() -> Path:
    """Where assembled models live: ``$JEV_CACHE_DIR``, else the platform's per-user cache folder
    (``platformdirs``: ``$XDG_CACHE_HOME/jev`` or ``~/.cache/jev`` on Linux, ``~/Library/Caches/jev`` on
    macOS, ``%LOCALAPPDATA%\\jev\\Cache`` on Windows)."""
    if os.environ.get("JEV_CACHE_DIR"):
        return Path(os.environ["JEV_CACHE_DIR"])
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("jev", appauthor=False))
