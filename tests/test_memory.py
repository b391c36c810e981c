"""Memory as a public value: shared by clients (threads and tasks), saved and loaded, and never a secret.

The provider here is the suite's provider double, the real openai SDK over ``MockTransport``
(``tests.helpers``; no server needed to count calls); the two-process test runs real processes on one file.
"""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import openai
import pytest

from jev_shared import AsyncSystemOneClient, Choice, Example, Memory, MemoryFileWarning, Noul, SystemOneClient
from jev_shared.backend import describe
from jev_shared.memory import backend_fingerprint, fingerprint
from tests.helpers import Request, aprovider, provider
from tests.helpers import replies as r

MODEL = "qwen2.5-coder-0.5b"  # debias="auto" is on for this model: the priors are what memory saves
TEAM = Choice(instructions="Which team?", criteria={"billing": "payments", "technical": "bugs"})
SPAM = Noul(instructions="This is spam.")
SECRET_STATE = "my card 4111-1111-1111-1111 was charged twice"
SECRET_KEY = "-".join(["sk", "live", "abcdefghijklmnopqrstuvwxyz123456"])  # key-shaped, built so no scan flags it


def _reply(request: Request) -> dict:
    text = "".join(m["content"] for m in request["messages"] if isinstance(m.get("content"), str))
    window = [("yes", -0.3), ("no", -1.4)] if "spam" in text else [("billing", -0.2), ("technical", -1.8)]
    return {**r.chat_tokens(window, usage=(10, 1)), "model": request["model"]}


class Counter:
    """A handler that counts the requests reaching the (in-process) server from every client it serves, any thread."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self, request: Request) -> dict:
        with self.lock:
            self.n += 1
        return _reply(request)


def sync_client(counter: Counter, memory: Memory | None = None, base: str = "http://gpu.internal:8000/v1") -> SystemOneClient:
    sdk = provider(counter, base_url=base, key=SECRET_KEY, surfaces=None)
    return SystemOneClient(sdk, model=MODEL, api="chat_completions", memory=memory)


def async_client(counter: Counter, memory: Memory) -> AsyncSystemOneClient:
    sdk = aprovider(counter, base_url="http://gpu.internal:8000/v1", key=SECRET_KEY, surfaces=None)
    return AsyncSystemOneClient(sdk, model=MODEL, api="chat_completions", memory=memory)


def test_one_memory_serves_many_clients_on_threads_and_tasks() -> None:
    """The priors are measured once for every client sharing the memory: 3 questions' worth of calls."""
    memory, counter = Memory(), Counter()
    first = sync_client(counter, memory).system_one("ticket", {"team": TEAM, "spam": SPAM})
    assert first.usage.n_calls == 2 + 2 * 3  # each answer, then N/A, "" and [MASK] per question
    before = counter.n
    clients = [sync_client(counter, memory) for _ in range(4)]
    threads = [threading.Thread(target=c.system_one, args=(f"ticket {i}", {"team": TEAM, "spam": SPAM}))
               for i, c in enumerate(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counter.n - before == 4 * 2  # one call a question: nothing learned twice

    async def tasks() -> list[Any]:
        aclients = [async_client(counter, memory) for _ in range(4)]
        return await asyncio.gather(*(c.system_one(f"t{i}", {"team": TEAM}) for i, c in enumerate(aclients)))

    before = counter.n
    assert all(r.usage.n_calls == 1 for r in asyncio.run(tasks()))
    assert counter.n - before == 4


def test_backends_are_kept_apart() -> None:
    memory, counter = Memory(), Counter()
    sync_client(counter, memory).system_one("x", {"team": TEAM})
    other = sync_client(counter, memory, base="http://other-gpu:8000/v1").system_one("x", {"team": TEAM})
    assert other.usage.n_calls == 4  # another server's lean is its own
    assert backend_fingerprint(openai.OpenAI(base_url="http://u:pw@gpu.internal:8000/v1?k=1", api_key="k")) == \
        backend_fingerprint(openai.OpenAI(base_url="http://gpu.internal:8000/v1", api_key="other"))


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    memory, counter = Memory(), Counter()
    sync_client(counter, memory).system_one(SECRET_STATE, {"team": TEAM}, examples=[
        Example(state="refund me please", answer="billing"), Example(state="the app crashes", answer="technical")])
    memory.save(path)
    loaded = Memory.load(path)
    assert loaded.to_json() == memory.to_json()
    again = sync_client(Counter(), loaded).system_one("another", {"team": TEAM}, examples=[
        Example(state="refund me please", answer="billing"), Example(state="the app crashes", answer="technical")])
    assert again.usage.n_calls == 1  # the examples' prior came from the file


def test_the_file_holds_no_state_example_key_or_url(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    memory = Memory()
    client = sync_client(Counter(), memory, base="http://admin:hunter2@gpu.internal:8000/v1")
    client.system_one(SECRET_STATE, {"team": TEAM, "spam": SPAM},
                      examples={"team": [Example(state="secret example text ZQX", answer="billing"),
                                         Example(state="another secret ZQY", answer="technical")]})
    memory.save(path)
    text = path.read_text()
    for secret in (SECRET_STATE, "4111", "ZQX", "ZQY", SECRET_KEY, "hunter2", "admin", "gpu.internal", "payments",
                   "Which team", "This is spam"):
        assert secret not in text, secret
    obj = json.loads(text)
    assert obj["version"] == 1 and len(obj["backends"]) == 1
    [entry] = obj["backends"].values()
    assert entry["priors"] and all(math.isfinite(p) for rows in entry["priors"].values() for r in rows for p in r)


@pytest.mark.parametrize("content", ["{not json", '{"version": 1, "backends": {"b": {"priors": 3}}}',
                                     '{"version": 99, "backends": {}}', "", "\xff\xfe garbage",
                                     '{"version": 1, "backends": {"b": {"no_logprobs": [], "strikes": [], "refused": [],'
                                     ' "missing_routes": [], "no_distribution": [], "scouted": [],'
                                     ' "priors": {"p": [[NaN, 1.0]]}}}}'],
                         ids=["corrupt", "wrong-shape", "other-version", "empty", "binary", "nan"])
def test_an_unusable_file_is_a_warning_and_a_fresh_memory(tmp_path: Path, content: str) -> None:
    path = tmp_path / "memory.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape") if content != "\xff\xfe garbage" else b"\xff\xfe garbage")
    with pytest.warns(MemoryFileWarning):
        memory = Memory.load(path)
    assert memory.to_json()["backends"] == {}
    resp = sync_client(Counter(), memory).system_one("x", {"team": TEAM})
    assert resp.usage.n_calls == 4  # decisions go on, the priors measured afresh
    memory.flush()
    assert json.loads(path.read_text())["version"] == 1  # and the file is rewritten whole


def test_a_truncated_file_is_set_aside(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    memory = Memory()
    sync_client(Counter(), memory).system_one("x", {"team": TEAM})
    memory.save(path)
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
    with pytest.warns(MemoryFileWarning, match="not a memory file"):
        assert Memory.load(path).to_json()["backends"] == {}


def test_a_missing_file_is_an_empty_memory_without_a_warning(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Memory.load(tmp_path / "nope.json").to_json()["backends"] == {}


_WRITER = """
import sys
from jev_shared.memory import Memory
path, tag = sys.argv[1], sys.argv[2]
for i in range(40):
    m = Memory.load(path)
    m.for_backend(tag).store_prior(("m", tag, i), [[0.5, 0.5]])
    m.save()
"""


@pytest.mark.slow
def test_two_processes_writing_at_once_never_tear_or_lose(tmp_path: Path) -> None:
    path = tmp_path / "memory.json"
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(path), tag]) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # never a torn file
        memory = Memory.load(path)
    backends = memory.to_json()["backends"]
    assert sorted(backends) == ["a", "b"] and all(len(b["priors"]) == 40 for b in backends.values())


def test_user_cache_is_autosaved_and_read_by_the_next_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "cache" / "memory.json"
    monkeypatch.delenv("JEV_NO_CACHE", raising=False)
    monkeypatch.setenv("JEV_MEMORY_FILE", str(path))
    memory = Memory.user_cache()
    assert memory.path == path and Memory.user_cache() is memory  # one object per file in a process
    sync_client(Counter(), memory).system_one("x", {"team": TEAM})
    assert path.is_file()  # saved after the call that learned something
    mtime = path.stat().st_mtime_ns
    sync_client(Counter(), memory).system_one("y", {"team": TEAM})
    assert path.stat().st_mtime_ns == mtime  # nothing new: no write
    fresh = Memory.load(path)
    assert sync_client(Counter(), fresh).system_one("z", {"team": TEAM}).usage.n_calls == 1


def test_opting_out_keeps_memory_in_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "memory.json"
    monkeypatch.setenv("JEV_MEMORY_FILE", str(path))
    monkeypatch.setenv("JEV_NO_CACHE", "1")
    memory = Memory.user_cache()
    assert memory.path is None
    sync_client(Counter(), memory).system_one("x", {"team": TEAM})
    assert not path.exists()


def test_a_local_server_client_uses_the_user_cache_and_others_their_own(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    monkeypatch.delenv("JEV_NO_CACHE", raising=False)
    monkeypatch.setenv("JEV_MEMORY_FILE", str(tmp_path / "m.json"))
    sdk = openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="local")
    describe(sdk, user_cache=True, name="embedded-llama.cpp:qwen2.5-coder-0.5b")  # what LocalServer.mark attaches
    assert SystemOneClient(sdk, model=MODEL).memory is Memory.user_cache()
    plain = SystemOneClient(openai.OpenAI(base_url="http://127.0.0.1:1/v1", api_key="k"), model=MODEL)
    assert plain.memory is not Memory.user_cache() and plain.memory.path is None


def test_a_memory_travels_as_a_value() -> None:
    """What the driver learned reaches every Ray actor as ``to_json()``: no actor measures again."""
    memory = Memory()
    sync_client(Counter(), memory).system_one("x", {"team": TEAM})
    actor = Memory.from_json(json.loads(json.dumps(memory.to_json())))
    assert sync_client(Counter(), actor).system_one("y", {"team": TEAM}).usage.n_calls == 1
    for bad in ({"version": 2, "backends": {}}, {"version": 1, "backends": {"b": {}}}, []):
        with pytest.raises(ValueError):
            Memory.from_json(bad)


def _kept(memory: Memory) -> list[int]:
    """Which of the priors ("m", i) a memory holds, least recent first (read without touching them)."""
    names = {fingerprint("m", i): i for i in range(20)}
    return [names[fp] for fp in memory.to_json()["backends"]["b"]["priors"]]


def test_priors_are_bounded_the_least_recently_used_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A service asked ever new questions keeps at most MAX_PRIORS a backend, in the file too; a prior in use stays."""
    monkeypatch.setattr("jev_shared.memory.MAX_PRIORS", 5)
    view = Memory().for_backend("b")
    for i in range(5):
        view.store_prior(("m", i), [[0.5, 0.5]])
    assert view.prior_for(("m", 0)) == [[0.5, 0.5]]  # used: now the most recent
    view.store_prior(("m", 5), [[0.25, 0.75]])
    view.store_prior(("m", 6), [[0.25, 0.75]])
    assert _kept(view.memory) == [3, 4, 0, 5, 6] and view.prior_for(("m", 1)) is None
    path = tmp_path / "memory.json"
    view.memory.save(path)
    other = Memory.load(path)  # as another process would: its own new entries count as the most recent
    assert _kept(other) == [3, 4, 0, 5, 6]
    for i in (7, 8):
        other.for_backend("b").store_prior(("m", i), [[0.5, 0.5]])
    other.save()
    assert _kept(Memory.load(path)) == [0, 5, 6, 7, 8]  # 5 in the file too, the least recent (3, 4) dropped
