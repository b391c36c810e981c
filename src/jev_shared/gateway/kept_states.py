"""``jev serve --keep-states FILE``: every answered request's state kept, one line per question, so ``jev calibrate``
fits the questions' lean from the traffic the gateway saw (docs/gateway.md).

A line is ``{"state": ..., "question_id": ...}``, what ``jev calibrate FILE --questions Q`` reads as a state with
no label. Lines are appended under the file's lock (``files.file_lock``), so every worker of ``--workers N`` writes
whole lines to the one file. The file stops growing at ``--keep-states-max-bytes`` (default and most: 64 MiB, what
``jev calibrate`` reads of a file): the gateway keeps answering, says so once in its log, and keeps nothing more
until the file is moved away.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..files import MAX_READ_BYTES, file_lock

#: The most bytes ``--keep-states`` writes to its file (``--keep-states-max-bytes``): what ``jev calibrate`` reads.
MAX_KEPT_BYTES = MAX_READ_BYTES
LOG = logging.getLogger("jev_shared.gateway")


def checked_limit(max_bytes: int) -> int:
    """``--keep-states-max-bytes``, at most what ``jev calibrate`` reads of a file (a ValueError past it)."""
    if max_bytes > MAX_KEPT_BYTES:
        raise ValueError(f"{max_bytes} is more than jev calibrate reads of a file ({MAX_KEPT_BYTES} bytes)")
    return max_bytes


def checked_path(path: str | os.PathLike[str]) -> Path:
    """The file to keep states in, checked before the gateway starts: its folder exists, it is no folder and no
    symlink, and it can be opened to append (created empty if it is not there). A ValueError or OSError names
    the file and why."""
    kept = Path(path)
    if not kept.parent.is_dir():
        raise ValueError(f"{kept}: its folder {kept.parent} does not exist")
    if kept.is_symlink():
        raise ValueError(f"{kept}: is a symlink; the kept states are never written through one")
    if kept.exists() and not kept.is_file():
        raise ValueError(f"{kept}: is not a regular file")
    with open(kept, "a", encoding="utf-8"):
        pass
    return kept


class StateLog:
    """Appends the states the gateway answered, whole lines only, up to ``max_bytes``."""

    def __init__(self, path: Path, max_bytes: int = MAX_KEPT_BYTES) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.full = False

    def keep(self, state: Any, question_ids: Iterable[str]) -> bool:
        """Append ``state`` once per question id; False (and one warning) where the file would pass its limit."""
        data = "".join(json.dumps({"state": state, "question_id": qid}, ensure_ascii=False, separators=(",", ":"))
                       + "\n" for qid in question_ids).encode()
        with file_lock(self.path):
            size = self.path.stat().st_size if self.path.exists() else 0
            if size + len(data) > self.max_bytes:
                if not self.full:
                    LOG.warning("jev serve: --keep-states %s holds %d bytes, its limit (--keep-states-max-bytes "
                                "%d): no more states are kept until it is moved away", self.path, size, self.max_bytes)
                self.full = True
                return False
            with open(self.path, "ab") as out:
                out.write(data)
        self.full = False
        return True
