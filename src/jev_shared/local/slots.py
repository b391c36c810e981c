"""Slots: a question's prompt (with its examples, if any) kept on disk as llama.cpp's own KV cache.

A new process meets a cold server: every question's prompt (the rules, the question, its options)
is read again before the first answer, about half a second a question on two cores, while a
warm call reads the state alone. llama.cpp can save a slot's KV cache to a file and restore it
in a millisecond (``/slots/{id}?action=save|restore``). This keeps one file per prompt, the state left out:

* the first request of a prompt on a server is pinned to a slot of its own (``id_slot``). If the
  prompt has a file, the file is restored into that slot first, and the request reads its state
  alone. If not, the slot is saved once it holds the prompt's **content-free twin** (the same prompt, the
  state ``N/A``): the debias prior's first request is that twin, pinned to the slot, so the slot is saved
  after its reply; a prompt whose prior is not asked next (debias off, the prior remembered, a repair turn)
  gets a twin of its own sent to the slot before its next request, or when the call is finished
  (:meth:`SlotCache.settle`, the clients', once the call's flows have ended); about 0.1 s, once a prompt. So a
  file holds the developer's question, its examples and ``N/A``, never a user's state: the saved tokens are checked
  against the twin's own, and a file that holds anything else (another request took the slot first) is deleted;
* a prompt with no file of its own starts its slot from the kept file used last (:meth:`SlotCache.seed`): every
  question's prompt begins with the same rules, which the server then finds there instead of reading them again;
* a question's examples are part of its prompt, written with the question (a prompt with examples is the one a
  new process reads longest: the demo's three took 26-34 s each on a loaded 2-core machine); the files are the
  user's own (``0o700`` folder), as the memory is; prompts past the server's slots are not kept.

Files live beside the memory (``<cache>/slots/<model>/``), at most :data:`MAX_FILES` of them and
:data:`MAX_BYTES` in all, the least recently used dropped; a prompt over :data:`MAX_PROMPT_TOKENS`
(a reranker's passages, a per-call list: read once, never again) is not kept. Each file is written with
its SHA-256 (``<key>.sha256``) and checked against it before it is restored; a file that does not match,
that the server cannot restore, or whose restored prompt's answer then fails the readout (its repair
turn is seen here: the slot is erased first) is removed, and the prompt kept anew. Everything here only makes a call
faster: a slot that holds something else is read anew by the server, so no answer depends on it.
Wraps the transport's ``send`` / ``asend`` (``SystemOneClient`` does so for a client that carries
one: ``Backend.slots``, set by ``LocalServer.client()`` unless caching is off).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import struct
import threading
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..calls import CONTENT_FREE_INTENTS, MAX_READ_TOKENS, Call, Intent, Reply
from ..files import read_bytes, write_atomic
from .first_round import FirstRound, first_round

#: Files kept per model (about 12 KB a token for the 0.5B model: ~1.6 MB a question's prompt).
MAX_FILES = 32
#: Bytes the files of a model may take in all.
MAX_BYTES = 128 * 1024 * 1024
#: Longer prompts are not kept (about 12 MB for the 0.5B model): they are per-call content far more
#: often than a question asked again, such as a reranker's ten passages.
MAX_PROMPT_TOKENS = 1024
#: What ``/apply-template`` reads of a Chat Completions body: the twin's prompt as its template renders it.
_TEMPLATE_FIELDS = ("messages", "chat_template_kwargs")


def _zero_shot(call: Call) -> str | None:
    """The key of a zero-shot prompt's request about its own state (an answer, a content-free prior), else None."""
    prompt = call.prompt
    return None if prompt is None or call.intent is Intent.REPAIR else prompt.key


def _content_free(call: Call) -> bool:
    """Whether a zero-shot request's state is one of the debias prior's content-free ones (never a user's)."""
    return call.intent in CONTENT_FREE_INTENTS


def _is_twin(call: Call) -> bool:
    """Whether a zero-shot request is the twin (the state ``N/A``): its slot, once answered, holds what is kept."""
    return call.intent is Intent.TWIN


def _repaired(call: Call) -> str | None:
    """The prompt's key of a repair turn of a zero-shot request (its reply failed the readout), else None."""
    prompt = call.prompt
    return prompt.key if prompt is not None and call.intent is Intent.REPAIR else None


class SlotCache:
    """One llama.cpp server's slots and the folder its questions' prompts are kept in."""

    def __init__(self, base_url: str, folder: Path, n_slots: int) -> None:
        self.base_url = base_url.removesuffix("/v1")
        self.folder = folder
        self.n_slots = n_slots
        self._slot: dict[str, int] = {}  # prompt key → its slot on this server (the first n_slots prompts)
        self._restored: set[str] = set()  # prompts restored from a file into their slot on this server
        self._rekeep: set[str] = set()  # restored prompts whose answer failed the readout: kept anew
        #: prompts with examples kept or restored in this call: held-out priors take the slot after, so settle()
        #: restores them
        self._restore_after: set[str] = set()
        #: prompt key → its first request, answered, its slot not yet saved: the debias prior's N/A call, pinned
        #: to the slot, is the twin the slot is saved after (one request fewer); else one of its own
        self._pending: dict[str, Call] = {}
        self._lock = threading.Lock()

    def file(self, key: str) -> Path:
        return self.folder / f"{key}.bin"

    def checksum(self, key: str) -> Path:
        """The SHA-256 of the prompt's file, written with it: a file that does not match is never restored."""
        return self.folder / f"{key}.sha256"

    def plan(self, call: Call) -> tuple[Call, int | None, bool]:
        """(the call to send, pinned to its prompt's slot if this is the prompt's first request here; the
        slot to restore the prompt's file into first; whether to keep the prompt after). No I/O but a stat."""
        key = _zero_shot(call)
        if key is None:
            return call, None, False
        with self._lock:
            if key in self._rekeep:  # its restored file failed the readout: the prompt is kept anew
                self._rekeep.discard(key)
                return _pinned(call, self._slot[key]), None, True
            if key in self._slot:  # read on this server already: a content-free twin (a debias prior's) rides
                # on the prompt its slot holds, so the server reads only its state; a user's is free
                return (_pinned(call, self._slot[key]) if _content_free(call) else call), None, False
            if len(self._slot) >= self.n_slots:
                return call, None, False  # no slot of its own left
            slot = self._slot[key] = len(self._slot)
        kept = self.file(key).is_file() and self.checksum(key).is_file()
        return _pinned(call, slot), slot if kept else None, not kept

    def restore(self, call: Call, slot: int) -> bool:
        """Load the call's kept prompt into its slot, if its file matches its checksum; a file that does not,
        or that the server refuses, is removed (False: then the prompt is kept anew)."""
        key = _zero_shot(call)
        if key is None:
            return False
        if not _verified(self.file(key), self.checksum(key)) or self._action(slot, "restore", key) is None:
            self._remove(key)  # bytes changed, a torn write, another llama.cpp's format
            return False
        with self._lock:
            self._restored.add(key)
            if call.prompt is not None and call.prompt.examples:  # held-out priors not remembered would take the slot
                self._restore_after.add(key)
        try:
            os.utime(self.file(key))  # used now: the oldest-first pruning drops the files not in use
        except OSError:
            pass
        return True

    def seed(self, call: Call) -> None:
        """Start a prompt's new slot (it has no file of its own yet) from the kept file used last: every question's
        prompt begins with the same rules (about 50 tokens), which the server then finds there and does not read
        again. Only a file checked against its SHA-256 is restored; none, or one the server refuses, costs nothing."""
        slot = (call.kwargs.get("extra_body") or {}).get("id_slot")
        stats = sorted(_stats(self.folder), reverse=True) if self.folder.is_dir() else []
        if not isinstance(slot, int) or not stats:
            return
        key = stats[0][2].stem
        if _verified(self.file(key), self.checksum(key)):
            self._action(slot, "restore", key)

    def distrust(self, call: Call) -> None:
        """A repair turn of a restored prompt (its answer failed the readout): the file is removed and the
        slot erased before the repair is read, and the prompt's next request keeps it anew. No answer
        depends on a file."""
        key = _repaired(call)
        with self._lock:
            if key is None or key not in self._restored:
                return
            self._restored.discard(key)
            self._rekeep.add(key)
            slot = self._slot[key]
        self._remove(key)
        self._action(slot, "erase", key)

    def _remove(self, key: str) -> None:
        self.file(key).unlink(missing_ok=True)
        self.checksum(key).unlink(missing_ok=True)

    def keep(self, call: Call) -> None:
        """Send the call's content-free twin to its slot, save the slot, and keep the file only if it
        holds exactly the twin's tokens (never a user's state)."""
        key, slot = _zero_shot(call), (call.kwargs.get("extra_body") or {}).get("id_slot")
        if key is None or not isinstance(slot, int) or call.twin is None and not _is_twin(call):
            return
        twin = call.kwargs if _is_twin(call) or call.twin is None else _pinned(call.twin(), slot).kwargs
        body = {k: v for k, v in twin.items() if k not in ("extra_body", "timeout")} | twin.get("extra_body", {})
        try:
            prompt = self._post("/apply-template", {k: body[k] for k in _TEMPLATE_FIELDS if k in body})["prompt"]
            ids = self._post("/tokenize", {"content": prompt, "parse_special": True})["tokens"]
            if len(ids) > MAX_PROMPT_TOKENS:
                return
            if not _is_twin(call):  # (the debias prior's N/A call is the twin: its slot holds it already)
                self._post("/v1/chat/completions", body)
        except (OSError, ValueError, KeyError, TypeError):
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        saved = self._action(slot, "save", key)
        if saved is None:
            return
        extra = saved.get("n_saved", -1) - len(ids)  # a BOS the server adds, the tokens it generated
        data = _read(self.file(key))
        if not (0 <= extra <= 1 + MAX_READ_TOKENS and data is not None and _holds(data, ids)):
            self._remove(key)  # the slot held another request by the time it was saved
            return
        try:
            write_atomic(self.checksum(key), hashlib.sha256(data).hexdigest() + "\n")
        except OSError:
            self._remove(key)
            return
        self._prune()

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        req = urllib.request.Request(self.base_url + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            return json.loads(r.read())

    def _action(self, slot: int, action: str, key: str) -> dict[str, Any] | None:
        try:
            return self._post(f"/slots/{slot}?action={action}", {"filename": f"{key}.bin"})
        except (OSError, ValueError):  # HTTPError included: a slot not saved or restored only costs speed
            return None

    def _prune(self) -> None:
        _prune(self)

    def overdue(self, call: Call) -> Call | None:
        """The pending first request of this call's prompt, to keep (with a twin of its own) before this call is
        sent, unless this call is the N/A twin itself."""
        key = _zero_shot(call) or _repaired(call)
        if key is None or key not in self._pending or _zero_shot(call) and _is_twin(call):
            return None
        with self._lock:
            return self._pending.pop(key, None)

    def after(self, call: Call, keep: bool) -> Call | None:
        """Once a sent call's reply is back, the call to keep the slot after, if any: a zero-shot prompt's first request
        waits (pending) for its debias prior's N/A call; that call, a first request that is the twin, or the first
        request of a prompt with examples keeps it now (no prior of its asks N/A, and its held-out prior would take
        the slot: its twin now reads the state ``N/A`` alone, after it the prompt's examples again)."""
        key = _zero_shot(call)
        if key is None or not (keep or key in self._pending):
            return None
        with self._lock:
            if keep and call.prompt is not None and call.prompt.examples:
                self._restore_after.add(key)  # its twin or not (``prepare`` asks N/A: the twin is the first request)
            elif not _is_twin(call):
                if keep:
                    self._pending[key] = call
                return None
            self._pending.pop(key, None)
        return call

    @property
    def pending(self) -> bool:  # a prompt's slot waits to be kept: settle() has work (the clients', after the flows)
        return bool(self._pending or self._restore_after)

    def settle(self) -> None:
        """Keep each prompt still pending with a twin of its own (no prior asked it), and put back each prompt with
        examples kept or restored in this call into its slot from its file (a millisecond: its held-out priors took the
        slot, and the next decision would read the examples again): the call is finished."""
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
            back, self._restore_after = [(k, self._slot[k]) for k in self._restore_after if k in self._slot], set()
        for call in pending:
            self.keep(call)
        for key, slot in back:
            if _verified(self.file(key), self.checksum(key)):
                self._action(slot, "restore", key)

    def wrap(self, send: Callable[[Call], Reply], firsts: list[Call] | None = None) -> Callable[[Call], Reply]:
        """``send`` with this cache around it (sync); ``firsts``: the call's first requests (first_round.py)."""
        turns = _round(self, firsts, threading.Event)

        def sending(call: Call) -> Reply:
            self.distrust(call)
            due = self.overdue(call)
            if due is not None:  # before this request, which would take the slot
                self.keep(due)
            call, slot, keep = self.plan(call)
            if slot is not None and not self.restore(call, slot):
                keep = True
            elif slot is None and keep:
                self.seed(call)
            reply = send(call)
            due = self.after(call, keep)
            if due is not None:
                self.keep(due)
            return reply
        return sending if turns is None else _in_turn(sending, turns)

    def awrap(self, asend: Callable[[Call], Awaitable[Reply]],
              firsts: list[Call] | None = None) -> Callable[[Call], Awaitable[Reply]]:
        """``asend`` with this cache around it; its loopback requests run off the event loop (``firsts``: as wrap's)."""
        turns = _round(self, firsts, asyncio.Event)

        async def sending(call: Call) -> Reply:
            if _repaired(call) is not None:
                await asyncio.to_thread(self.distrust, call)
            due = self.overdue(call)
            if due is not None:
                await asyncio.to_thread(self.keep, due)
            call, slot, keep = self.plan(call)
            if slot is not None and not await asyncio.to_thread(self.restore, call, slot):
                keep = True
            elif slot is None and keep:
                await asyncio.to_thread(self.seed, call)
            reply = await asend(call)
            due = self.after(call, keep)
            if due is not None:
                await asyncio.to_thread(self.keep, due)
            return reply
        return sending if turns is None else _ain_turn(sending, turns)


def _round(cache: SlotCache, firsts: list[Call] | None, event: Callable[[], Any]) -> FirstRound | None:
    """The call's first round: its leaders are the first requests :meth:`SlotCache.plan` would pin to a slot of
    their own (a zero-shot prompt this server has not read, a slot free for it)."""
    if not firsts:
        return None
    leaders: dict[str, Call] = {}
    with cache._lock:
        free = cache.n_slots - len(cache._slot)
        for call in firsts:
            key = _zero_shot(call)
            if key is not None and key not in cache._slot and key not in leaders and len(leaders) < free:
                leaders[key] = call
    return first_round(firsts, leaders, _zero_shot, event)


def _in_turn(send: Callable[[Call], Reply], turns: FirstRound) -> Callable[[Call], Reply]:
    def sending(call: Call) -> Reply:
        turns.turn(call)
        try:
            return send(call)
        finally:
            turns.answered(call)
    return sending


def _ain_turn(asend: Callable[[Call], Awaitable[Reply]], turns: FirstRound) -> Callable[[Call], Awaitable[Reply]]:
    async def sending(call: Call) -> Reply:
        await turns.aturn(call)
        try:
            return await asend(call)
        finally:
            turns.answered(call)
    return sending


def _prune(cache: SlotCache) -> None:
    """Drop the least recently used files past :data:`MAX_FILES` or :data:`MAX_BYTES`."""
    total = 0
    for rank, (_, size, path) in enumerate(sorted(_stats(cache.folder), reverse=True)):
        total += size
        if rank >= MAX_FILES or total > MAX_BYTES:
            cache._remove(path.stem)


def _verified(file: Path, checksum: Path) -> bool:
    """Whether a kept file's bytes match the SHA-256 written with it."""
    try:
        data = read_bytes(file, MAX_BYTES, follow_symlinks=False)
        told = read_bytes(checksum, 256, follow_symlinks=False).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return hashlib.sha256(data).hexdigest() == told


def _stats(folder: Path) -> list[tuple[float, int, Path]]:
    """(mtime, size, path) of each kept file (one another process removed meanwhile left out)."""
    out = []
    for path in folder.glob("*.bin"):
        try:
            st = path.stat()
        except OSError:
            continue
        out.append((st.st_mtime, st.st_size, path))
    return out


def _pinned(call: Call, slot: int) -> Call:
    return replace(call, kwargs={**call.kwargs, "extra_body": {**(call.kwargs.get("extra_body") or {}), "id_slot": slot}})


def _read(path: Path) -> bytes | None:
    """A saved slot's bytes (a regular file, not a symlink, at most MAX_BYTES), or None."""
    try:
        return read_bytes(path, MAX_BYTES, follow_symlinks=False)
    except OSError:
        return None


def _holds(data: bytes, ids: list[int]) -> bool:
    """Whether a saved slot holds these token ids in a row (llama.cpp stores a slot's tokens as int32)."""
    return struct.pack(f"<{len(ids)}i", *ids) in data
