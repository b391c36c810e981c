"""A kept prompt's file is verified before it is trusted. A checksum is written with it and
checked before restoring (bytes changed inside: never restored, kept anew); a restored prompt whose
answer fails the readout has its file removed and its slot erased before the repair is read, and the
next request keeps it anew. The server here is a double of llama.cpp's slot endpoints."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path
from typing import Any

from jev_shared import Choice, SystemOneClient
from jev_shared.calls import Call, Reply
from jev_shared.local.slots import SlotCache
from tests.helpers import Request, provider
from tests.helpers import replies as r
from tests.helpers.calls import zero_shot

IDS = [11, 22, 33, 44]
TEAM = {"team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"})}


class Slots(SlotCache):
    """SlotCache over a double of llama.cpp: a save writes the twin's token ids and some KV bytes."""

    def __init__(self, folder: Path) -> None:
        super().__init__("http://127.0.0.1:9/v1", folder, n_slots=4)
        self.actions: list[str] = []

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        return {"/apply-template": {"prompt": "P"}, "/tokenize": {"tokens": IDS}}.get(path, {})

    def _action(self, slot: int, action: str, key: str) -> dict[str, Any] | None:
        self.actions.append(action)
        if action == "save":
            self.file(key).write_bytes(b"HEAD" + struct.pack(f"<{len(IDS)}i", *IDS) + bytes(range(256)) * 8)
        return {"n_saved": len(IDS) + 1}


def _call(state: str = "a ticket") -> Call:
    return zero_shot(state)


def _send(call: Call) -> Reply:
    return Reply({}, 1.0)


def _ask(cache: SlotCache) -> None:
    """One call's request, then the call finished: a prompt no debias prior kept is kept now."""
    cache.wrap(_send)(_call())
    cache.settle()


def test_a_checksum_is_written_with_each_kept_file(tmp_path: Path):
    cache = Slots(tmp_path)
    _ask(cache)
    [kept] = tmp_path.glob("*.bin")
    assert cache.checksum(kept.stem).read_text().strip() == hashlib.sha256(kept.read_bytes()).hexdigest()


def test_a_file_whose_bytes_changed_is_never_restored_and_is_kept_anew(tmp_path: Path):
    _ask(Slots(tmp_path))
    [kept] = tmp_path.glob("*.bin")
    intact = Slots(tmp_path)
    _ask(intact)
    assert intact.actions == ["restore"]  # a new server, the file as written: restored
    data = bytearray(kept.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one byte inside the KV data
    kept.write_bytes(bytes(data))
    fresh = Slots(tmp_path)
    _ask(fresh)
    assert "restore" not in fresh.actions and fresh.actions == ["save"]  # verified, refused, kept anew
    assert cache_ok(fresh, kept)


def test_a_file_without_its_checksum_is_kept_anew(tmp_path: Path):
    first = Slots(tmp_path)
    _ask(first)
    [kept] = tmp_path.glob("*.bin")
    first.checksum(kept.stem).unlink()
    again = Slots(tmp_path)
    _ask(again)
    assert again.actions == ["save"] and cache_ok(again, kept)


def cache_ok(cache: SlotCache, kept: Path) -> bool:
    return cache.checksum(kept.stem).read_text().strip() == hashlib.sha256(kept.read_bytes()).hexdigest()


def _client(cache: SlotCache, backend: Any) -> SystemOneClient:
    return SystemOneClient(provider(backend, jev_slots=cache), model="m", api="chat_completions", method="logprobs",
                           debias=False, strict_labels=True)  # a reply naming no option fails the readout


def test_a_restored_prompt_whose_answer_fails_the_readout_is_removed_then_kept_anew(tmp_path: Path):
    right = r.chat_tokens({"billing": -0.1, "technical": -2.5})
    _client(Slots(tmp_path), lambda req: right).system_one("a ticket", TEAM)  # kept by an earlier process
    [kept] = tmp_path.glob("*.bin")
    asked: list[Request] = []

    def backend(req: Request) -> dict[str, Any]:
        asked.append(req)  # the first reply: what a corrupt KV cache makes the model say, no option at all
        return r.chat_tokens({"zzz": -0.1, "qqq": -0.9}) if len(asked) == 1 else right

    cache = Slots(tmp_path)
    client = _client(cache, backend)
    assert client.system_one("a ticket", TEAM).answers["team"].choice == "billing"  # the repair answered
    assert cache.actions == ["restore", "erase"] and not kept.exists()  # erased before the repair was read
    client.system_one("another ticket", TEAM)
    assert cache.actions[-1] == "save" and cache_ok(cache, kept)  # the next request kept it anew
