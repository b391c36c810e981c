"""Slots: a zero-shot question's prompt kept on disk as llama.cpp's own KV cache (issue 27).

A new process meets a cold server: every question's prompt (the rules, the question, its options)
is read again before the first answer, about half a second a question on two cores, while a
warm call reads the state alone. llama.cpp can save a slot's KV cache to a file and restore it
in a millisecond (``/slots/{id}?action=save|restore``). This keeps one file per zero-shot prompt:

* a **content-free** request (the debias prior's ``N/A``, ``""``, ``[MASK]``: nothing of a user's
  state) is pinned to the prompt's slot (``id_slot``), and the slot saved after it, so a file holds
  the developer's question and a content-free state only: never a state or an example (prompts with
  examples are never kept);
* the first request of a prompt on a server that has not read it restores its file into its slot
  and is pinned there; later ones find it as llama.cpp finds any cached prefix.

Files live beside the memory (``<cache>/slots/<model>/``), at most :data:`MAX_FILES` of them, the
oldest dropped; a file the server cannot restore is removed. Everything here only makes a call
faster: a slot that holds something else is read anew by the server, so no answer depends on it.
Wraps the transport's ``send`` / ``asend`` (``SystemOneClient`` does so for a client that carries
one: ``client.jev_slots``, set by ``LocalServer.client()`` unless caching is off).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from .calls import Call, Reply
from .priors import CONTENT_FREE
from .prompt import state_block

#: Files kept per model (about 12 KB a token for the 0.5B model: ~1.7 MB a question's prompt).
MAX_FILES = 32
_CONTENT_FREE_TURNS = frozenset(state_block(s) for s in CONTENT_FREE)


def _zero_shot(call: Call) -> tuple[str, str] | None:
    """(the prompt's key, the user turn) of a zero-shot state_last request, else None."""
    messages = call.kwargs.get("messages")
    if not isinstance(messages, list) or len(messages) != 2:
        return None
    system, user = messages
    if system.get("role") != "system" or user.get("role") != "user" or not isinstance(user.get("content"), str):
        return None
    digest = hashlib.sha256(json.dumps([call.kwargs.get("model"), system.get("content")]).encode()).hexdigest()
    return digest[:32], user["content"]


class SlotCache:
    """One llama.cpp server's slots and the folder its zero-shot prompts are kept in."""

    def __init__(self, base_url: str, folder: Path, n_slots: int) -> None:
        self.base_url = base_url.removesuffix("/v1")
        self.folder = folder
        self.n_slots = n_slots
        self._slot: dict[str, int] = {}  # prompt key → the slot it is pinned to on this server
        self._live: set[str] = set()  # keys this server has read (restored or saved)
        self._lock = threading.Lock()

    def _slot_for(self, key: str) -> int | None:
        """The key's slot: one each for the first ``n_slots`` prompts this server meets, then none."""
        with self._lock:
            if key not in self._slot and len(self._slot) < self.n_slots:
                self._slot[key] = len(self._slot)
            return self._slot.get(key)

    def _claim_restore(self, key: str) -> bool:
        """True once per key and server: the caller restores its file (if there is one)."""
        with self._lock:
            if key in self._live:
                return False
            self._live.add(key)
            return (self.folder / f"{key}.bin").is_file()

    def plan(self, call: Call) -> tuple[Call, str | None, int | None]:
        """(the call to send, pinned to a slot where that helps; the key to save after it, if any; the slot
        to restore its file into first, if any). No I/O."""
        found = _zero_shot(call)
        if found is None:
            return call, None, None
        key, turn = found
        content_free = turn in _CONTENT_FREE_TURNS
        restoring = self._claim_restore(key)
        if not (content_free or restoring):
            return call, None, None
        slot = self._slot_for(key)
        if slot is None:
            return call, None, None
        extra = {**(call.kwargs.get("extra_body") or {}), "id_slot": slot}
        pinned = replace(call, kwargs={**call.kwargs, "extra_body": extra})
        return pinned, key if content_free else None, slot if restoring else None

    def restore(self, call: Call, slot: int | None) -> None:
        """Load the pinned call's kept prompt into its slot; a file the server refuses is removed."""
        found = _zero_shot(call)
        if slot is None or found is None:
            return
        if not self._action(slot, "restore", found[0]):
            (self.folder / f"{found[0]}.bin").unlink(missing_ok=True)  # another llama.cpp's format, a torn file

    def before(self, call: Call) -> tuple[Call, str | None]:
        """:meth:`plan`, then the restore it asks for."""
        call, key, slot = self.plan(call)
        self.restore(call, slot)
        return call, key

    def after(self, key: str | None) -> None:
        """Save the slot a content-free request was pinned to; keep the folder bounded."""
        if key is None:
            return
        slot = self._slot.get(key)
        if slot is None:
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if self._action(slot, "save", key):
            self._prune()

    def _action(self, slot: int, action: str, key: str) -> bool:
        body = json.dumps({"filename": f"{key}.bin"}).encode()
        req = urllib.request.Request(f"{self.base_url}/slots/{slot}?action={action}", data=body,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status == 200
        except OSError:  # HTTPError included: a slot that cannot be saved or restored only costs speed
            return False

    def _prune(self) -> None:
        files = sorted(self.folder.glob("*.bin"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[MAX_FILES:]:
            old.unlink(missing_ok=True)

    def wrap(self, send: Callable[[Call], Reply]) -> Callable[[Call], Reply]:
        """``send`` with this cache around it (sync)."""
        def sending(call: Call) -> Reply:
            call, key = self.before(call)
            reply = send(call)
            self.after(key)
            return reply
        return sending

    def awrap(self, asend: Callable[[Call], Awaitable[Reply]]) -> Callable[[Call], Awaitable[Reply]]:
        """``asend`` with this cache around it; its loopback requests run off the event loop."""
        async def sending(call: Call) -> Reply:
            call, key, slot = self.plan(call)
            if slot is not None:
                await asyncio.to_thread(self.restore, call, slot)
            reply = await asend(call)
            if key is not None:
                await asyncio.to_thread(self.after, key)
            return reply
        return sending

