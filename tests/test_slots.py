"""Zero-shot prompts kept as llama.cpp's own KV cache (src/jev_shared/local/slots.py), on the real embedded server.

SmolLM2 (the wire model). What is checked is what the server itself reports: the tokens a reply had
to read anew (``timings.prompt_n``) and the tokens a kept file holds.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
from pathlib import Path
from typing import Any

import pytest

from jev_shared import AsyncSystemOneClient, Choice, Example, Noul, SystemOneClient
from jev_shared.backend import Backend, describe
from jev_shared.calls import Call, Intent
from jev_shared.local import WIRE_MODEL, LocalServer
from jev_shared.local.slots import SlotCache
from jev_shared.memory import Memory
from jev_shared.prompt import state_block
from tests.helpers.calls import with_turns, zero_shot

pytestmark = pytest.mark.slow

STATE = "Invoice 88213 was charged twice to my Visa card, please refund it quickly."
QUESTIONS = {"team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"}),
             "spam": Noul(instructions="This is spam.")}


def _client(srv: LocalServer) -> SystemOneClient:
    return SystemOneClient(srv.client(), model=srv.model, debug=True)


def _computed(resp: Any, reading: str | None = None) -> dict[str, list[int]]:
    """Per question, the prompt tokens each of its replies had the server read anew (``reading="reversed"``: those
    of the choices asked a second time, reversed)."""
    questions = (resp.debug[reading] if reading else resp.debug)["questions"]
    return {qid: [a["data"]["timings"]["prompt_n"] for a in info["attempts"] if a["kind"] == "response"]
            for qid, info in questions.items()}


def _both_orders(resp: Any) -> list[int]:
    """The prompt tokens the choice's first reply read anew, as listed and reversed."""
    return [_computed(resp)["team"][0], _computed(resp, "reversed")["team"][0]]


def _holds(path: Path, ids: list[int]) -> bool:
    """Whether a kept file holds these token ids in a row (it stores the prompt's ids as int32)."""
    return struct.pack(f"<{len(ids)}i", *ids) in path.read_bytes()


def test_a_new_server_restores_the_prompts_and_reads_only_the_state(tmp_path: Path) -> None:
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        cold = _computed(_client(srv).system_one(STATE, QUESTIONS))
        files = sorted(tmp_path.glob("*.bin"))
        assert len(files) == 2  # one per zero-shot prompt
        question = [srv.tokenize(" Which team?"), srv.tokenize(" This is spam.")]
        state = srv.tokenize(" charged twice to my Visa card")
        assert all(any(_holds(f, q) for f in files) for q in question)  # the question is there
        assert not any(_holds(f, state) for f in files)  # the user's state never is
    for f in files:
        os.utime(f, (1_000_000_000, 1_000_000_000))  # kept long ago
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:  # a new server: as a new process meets it
        warm = _computed(_client(srv).system_one(STATE, QUESTIONS))
    assert all(f.stat().st_mtime > 1_000_000_000 for f in files)  # restored: used now, so pruned last
    for qid in QUESTIONS:
        assert warm[qid][0] < cold[qid][0] / 3, (qid, cold, warm)  # the prompt came from the file


def test_without_the_files_the_first_call_reads_the_whole_prompt() -> None:
    with LocalServer(WIRE_MODEL, prompt_cache=False) as srv:
        assert srv.prompt_folder is None and Backend.of(srv.client()).slots is None
        resp = _client(srv).system_one(STATE, QUESTIONS)
    assert all(calls[0] > 60 for calls in _computed(resp).values())  # the rules and the question, read anew


def test_a_prompt_with_examples_is_kept_and_a_new_process_asks_nothing_twice(tmp_path: Path) -> None:
    """A question's examples are part of its prompt: kept with it (never the user's state), so a new server
    restores the prompt, the remembered prior asks nothing, and its first decision reads the state alone."""
    shots = [Example(state="My card was billed twice.", answer="billing"),
             Example(state="The app crashes.", answer="technical")]
    question = {"team": QUESTIONS["team"]}
    path, folder = tmp_path / "memory.json", tmp_path / "slots"
    with LocalServer(WIRE_MODEL, prompt_cache=folder) as srv:
        cold = SystemOneClient(srv.client(), model=srv.model, debias=True, debug=True, memory=Memory.load(path),
                               order="listed")  # one prompt (the default asks a choice with examples reversed too)
        first = cold.system_one(STATE, question, examples={"team": shots})
        assert first.debug["prior_calls"]["team"] == 2  # one per example, once
        again = cold.system_one("Where is my parcel?", question, examples={"team": shots})
        assert _computed(again)["team"][0] < 20  # its held-out priors took the slot; the file put the prompt back
        example, state = srv.tokenize(" app crashes."), srv.tokenize(" charged twice to my Visa card")
    files = list(folder.glob("*.bin"))
    assert len(files) == 1
    assert _holds(files[0], example) and not _holds(files[0], state)  # the examples are there, the user's state never
    with LocalServer(WIRE_MODEL, prompt_cache=folder) as srv:  # a new server and memory: as a new process meets them
        warm = SystemOneClient(srv.client(), model=srv.model, debias=True, debug=True, memory=Memory.load(path),
                               order="listed")
        second = warm.system_one(STATE, question, examples={"team": shots})
    assert second.usage.n_calls == 1 and not second.debug.get("prior_calls", {}).get("team")
    # the same answer; its figures to a few hundredths (the state read on a restored cache, not in one batch with it)
    assert second.answers["team"].probabilities == pytest.approx(first.answers["team"].probabilities, abs=0.05)
    assert _computed(second)["team"][0] < _computed(first)["team"][0] / 3  # the prompt came from the file


def test_after_prepare_the_first_decision_finds_the_prompt_with_its_examples(tmp_path: Path) -> None:
    """``prepare`` asks N/A: its first request is the twin, kept at once; the held-out priors that follow take the
    slot, and the file puts the prompt back, so the first decision reads its state alone, as the second does; so
    for both orders (the default asks a choice with examples reversed too, a prompt and a slot of its own)."""
    shots = [Example(state="My card was billed twice.", answer="billing"),
             Example(state="The app crashes.", answer="technical")]
    question = {"team": Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"},
                               examples=shots)}
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path / "slots") as srv:
        client = SystemOneClient(srv.client(), model=srv.model, debias=True, debug=True,
                                 memory=Memory.load(tmp_path / "memory.json"))
        assert client.prepare(question).prior_calls == 4  # two held out, in each order
        first, second = (_both_orders(client.system_one(state, question)) for state in (STATE, "Where is my parcel?"))
    assert max(first + second) < 30, (first, second)  # the state and its turn, not the examples again
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path / "slots") as srv:  # the file kept, the priors forgotten
        client = SystemOneClient(srv.client(), model=srv.model, debias=True, debug=True, memory=Memory())
        assert client.prepare(question).prior_calls == 4  # asked again: they take the slots the files were restored in
        first = _both_orders(client.system_one(STATE, question))
    assert max(first) < 30, first


def test_a_file_the_server_cannot_restore_is_removed_and_kept_anew(tmp_path: Path) -> None:
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        expected = SystemOneClient(srv.client(), model=srv.model).system_one(STATE, QUESTIONS)
    for f in tmp_path.glob("*.bin"):
        f.write_bytes(b"not a llama.cpp state file")
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        resp = SystemOneClient(srv.client(), model=srv.model).system_one(STATE, QUESTIONS)
    assert resp.choices["team"].choice == expected.choices["team"].choice
    files = sorted(tmp_path.glob("*.bin"))  # refused by their checksum before restoring, and kept anew at once
    assert len(files) == 2 and all(f.read_bytes() != b"not a llama.cpp state file" for f in files)
    assert all(f.with_suffix(".sha256").read_text().strip() == hashlib.sha256(f.read_bytes()).hexdigest()
               for f in files)


class _Raced(SlotCache):
    """Another request takes the slot between the twin and the save, as a concurrent caller's may."""

    def _action(self, slot: int, action: str, key: str) -> dict[str, Any] | None:
        if action == "save":
            self._post("/v1/chat/completions", {"model": "m", "max_tokens": 1, "id_slot": slot, "messages": [
                {"role": "system", "content": "Which team?"}, {"role": "user", "content": state_block(STATE)}]})
        return super()._action(slot, action, key)


def test_a_slot_another_request_took_is_not_kept(tmp_path: Path) -> None:
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        client = srv.client()
        describe(client, slots=_Raced(srv.base_url, tmp_path, srv.n_parallel))
        SystemOneClient(client, model=srv.model).system_one(STATE, {"spam": QUESTIONS["spam"]})
    assert list(tmp_path.glob("*.bin")) == []  # it held a user's state: deleted


def _call(state: str, system: str = "rules and a question") -> Call:
    return zero_shot(state, system)


def test_only_a_prompts_first_request_on_a_server_is_pinned(tmp_path: Path) -> None:
    cache = SlotCache("http://127.0.0.1:9/v1", tmp_path, n_slots=2)  # no file: nothing to restore
    first, restore, keep = cache.plan(_call(STATE))
    assert first.kwargs["extra_body"] == {"id_slot": 0} and restore is None and keep
    again, _, keep_again = cache.plan(_call("another state"))
    assert "extra_body" not in again.kwargs and not keep_again  # read on this server already
    other, _, _ = cache.plan(_call(STATE, system="another question"))
    assert other.kwargs["extra_body"]["id_slot"] == 1
    third, _, keep_third = cache.plan(_call(STATE, system="a third question"))
    assert "extra_body" not in third.kwargs and not keep_third  # more prompts than slots: left to the server
    with_examples = with_turns([{"role": "system", "content": "x"}, {"role": "user", "content": "ex"},
                                {"role": "assistant", "content": "billing"},
                                {"role": "user", "content": state_block("N/A")}], Intent.TWIN)
    assert cache.plan(with_examples) == (with_examples, None, False)


def test_the_debias_priors_content_free_twins_ride_on_their_prompts_slot(tmp_path: Path) -> None:
    """After a prompt's answer, its content-free twins (the debias prior's) go to the slot that holds the prompt,
    so a fresh server reads only their state; a user's state of the same prompt is left to the server."""
    cache = SlotCache("http://127.0.0.1:9/v1", tmp_path, n_slots=2)
    cache.plan(_call(STATE))
    cache.plan(_call(STATE, system="another question"))
    for state in ("N/A", "", "[MASK]"):
        twin, restore, keep = cache.plan(_call(state, system="another question"))
        assert twin.kwargs["extra_body"] == {"id_slot": 1} and restore is None and not keep
    user, _, _ = cache.plan(_call("a user's other state", system="another question"))
    assert "extra_body" not in user.kwargs


def test_the_async_client_restores_them_too(tmp_path: Path) -> None:
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        cold = _computed(_client(srv).system_one(STATE, QUESTIONS))
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        aclient = AsyncSystemOneClient(srv.async_client(), model=srv.model, debug=True)
        warm = _computed(asyncio.run(aclient.system_one(STATE, QUESTIONS)))
    assert all(warm[q][0] < cold[q][0] / 3 for q in QUESTIONS), (cold, warm)


def test_a_prompt_past_the_token_cap_is_not_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A long prompt (a reranker's passages, read once) is answered but not written: its file would be many MB."""
    monkeypatch.setattr("jev_shared.local.slots.MAX_PROMPT_TOKENS", 40)  # the rules alone are longer
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        resp = _client(srv).system_one(STATE, QUESTIONS)
    assert set(resp.answers) == set(QUESTIONS) and list(tmp_path.glob("*.bin")) == []


def test_the_least_recently_used_files_go_past_the_count_or_the_bytes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    cache = SlotCache("http://127.0.0.1:9/v1", tmp_path, n_slots=4)
    for i in range(5):  # f0 oldest ... f4 newest, 10 bytes each
        (tmp_path / f"f{i}.bin").write_bytes(b"x" * 10)
        os.utime(tmp_path / f"f{i}.bin", (1_000_000 + i, 1_000_000 + i))
    monkeypatch.setattr("jev_shared.local.slots.MAX_FILES", 4)
    cache._prune()
    assert sorted(p.name for p in tmp_path.glob("*.bin")) == ["f1.bin", "f2.bin", "f3.bin", "f4.bin"]
    monkeypatch.setattr("jev_shared.local.slots.MAX_BYTES", 25)
    cache._prune()
    assert sorted(p.name for p in tmp_path.glob("*.bin")) == ["f3.bin", "f4.bin"]


def test_a_prompt_whose_prior_writes_a_names_path_is_kept_too(tmp_path: Path) -> None:
    """Names that share first tokens are read by a call that writes several tokens (pathread.py), the debias
    prior's content-free twin included: its slot holds those tokens after the prompt, and is kept all the same."""
    from tests.test_path_read_live import NAMES

    question = {"q": Choice(instructions="Which banking intent?", criteria=NAMES)}
    with LocalServer(WIRE_MODEL, prompt_cache=tmp_path) as srv:
        resp = SystemOneClient(srv.client(), model=srv.model, debias=True, debug=True).system_one(STATE, question)
        sent = [a["data"] for a in resp.debug["questions"]["q"]["attempts"] if a["kind"] == "request"]
        assert sent[0]["max_tokens"] > 2  # the path is written
        assert len(list(tmp_path.glob("*.bin"))) == 1
