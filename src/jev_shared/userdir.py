"""The per-user cache folder: where assembled models, the memory file and kept prompts live (one place).

``$JEV_CACHE_DIR``, else the platform's per-user cache folder (``platformdirs``); ``$JEV_MEMORY_FILE`` moves
the memory file alone; ``$JEV_NO_CACHE=1`` keeps what the engine learns in the process only.
"""

from __future__ import annotations

import os
from pathlib import Path

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


__all__ = ["NO_CACHE_ENV", "cache_dir", "caching_off", "memory_file"]
