"""The memory file is read bounded, from a regular file only, validated
row by row against the question it serves, and its lock never follows a symlink."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from jev_shared import Choice, Memory, MemoryFileWarning, SystemOneClient
from jev_shared.files import FileReadError, read_bytes, read_text
from tests.helpers import Request, provider
from tests.helpers import replies as r

MODEL = "qwen2.5-coder-0.5b"  # debias="auto" is on for this model: its priors are kept in memory
NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
SIX = Choice(instructions="Which one?", criteria={n: f"option {n}" for n in NAMES})
LEAN = {"alpha": -2.0, "bravo": -1.0, "charlie": -1.5, "delta": -2.5, "echo": -0.7, "foxtrot": -1.2}


def _reply(request: Request) -> dict:
    return r.chat_tokens(LEAN, usage=(10, 1))


def _answer(memory: Memory) -> dict[str, float]:
    client = SystemOneClient(provider(_reply), model=MODEL, api="chat_completions", memory=memory)
    return dict(client.system_one("a ticket", {"which": SIX}).answers["which"].probabilities)


def test_prior_rows_shorter_than_the_options_are_a_warning_never_a_wrong_answer(tmp_path: Path):
    path = tmp_path / "memory.json"
    memory = Memory.load(path)
    right = _answer(memory)
    memory.save()
    saved = json.loads(path.read_text())
    for backend in saved["backends"].values():
        for fp, rows in backend["priors"].items():
            backend["priors"][fp] = [row[:3] for row in rows]  # three of six options
    path.write_text(json.dumps(saved))

    with pytest.warns(MemoryFileWarning, match="needs 3 of 6"):
        answer = _answer(Memory.load(path))
    assert set(answer) == set(NAMES)
    assert answer == pytest.approx(right)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "folder"])
def test_a_memory_file_that_is_not_a_regular_file_is_a_warning_and_an_empty_memory(tmp_path: Path, special: str):
    path = Path(special)
    if special == "fifo":
        path = tmp_path / "memory.json"
        os.mkfifo(path)
    elif special == "folder":
        path = tmp_path / "memory.json"
        path.mkdir()
    started = time.perf_counter()
    with pytest.warns(MemoryFileWarning, match="regular file"):
        memory = Memory.load(path)
    assert memory.to_json()["backends"] == {} and time.perf_counter() - started < 2.0
    memory.for_backend("b").mark_scouted("m")
    with pytest.warns(MemoryFileWarning, match="could not save"):
        assert memory.flush() is False  # never replaced by a file, never written through
    assert not path.is_file()


def test_jev_memory_file_dev_zero_in_a_child_process_warns_and_answers(tmp_path: Path):
    import subprocess
    import sys

    code = ("import warnings; from jev_shared import Memory\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always'); m = Memory.user_cache()\n"
            "print(len(w), m.to_json()['backends'])")
    env = {**os.environ, "JEV_MEMORY_FILE": "/dev/zero"}
    env.pop("JEV_NO_CACHE", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "{}"]


def test_the_lock_never_creates_a_symlinks_target(tmp_path: Path):
    path = tmp_path / "memory.json"
    target = tmp_path / "elsewhere" / "created"
    target.parent.mkdir()
    (tmp_path / "memory.json.lock").symlink_to(target)
    memory = Memory(path)
    memory.for_backend("b").mark_scouted("m")
    with pytest.warns(MemoryFileWarning, match="symlink"):
        assert memory.flush() is False
    assert not target.exists() and not path.exists()


def test_a_save_waits_for_another_holder_of_the_lock(tmp_path: Path):
    """The lock is filelock's: a second saver in this process waits for the first."""
    from filelock import FileLock

    path = tmp_path / "memory.json"
    held = FileLock(str(path) + ".lock")
    held.acquire()
    memory = Memory(path)
    memory.for_backend("b").mark_scouted("m")
    saver = threading.Thread(target=memory.save)
    saver.start()
    time.sleep(0.3)
    assert saver.is_alive() and not path.exists()
    held.release()
    saver.join(10)
    assert json.loads(path.read_text())["backends"]["b"]["scouted"] == ["m"]


def test_the_bounded_reader(tmp_path: Path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    assert read_bytes(big, 101) == b"x" * 101
    with pytest.raises(FileReadError, match="larger than 100 bytes"):
        read_bytes(big, 100)
    with pytest.raises(FileReadError, match="not a regular file"):
        read_bytes("/dev/zero")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FileReadError, match="FIFO"):
        read_text(fifo)
    link = tmp_path / "link"
    link.symlink_to(big)
    assert read_bytes(link) == b"x" * 101
    with pytest.raises(FileReadError, match="symlink"):
        read_bytes(link, follow_symlinks=False)
    with pytest.raises(FileNotFoundError):
        read_bytes(tmp_path / "missing")


def test_the_cache_folder_is_platformdirs_and_linux_keeps_dot_cache_jev(monkeypatch: pytest.MonkeyPatch):
    import platformdirs

    from jev_shared.local import cache_dir, memory_file

    monkeypatch.delenv("JEV_CACHE_DIR", raising=False)
    monkeypatch.delenv("JEV_MEMORY_FILE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert cache_dir() == Path(platformdirs.user_cache_dir("jev", appauthor=False))
    if os.uname().sysname == "Linux":
        assert cache_dir() == Path.home() / ".cache" / "jev"
    calls = []
    monkeypatch.setattr(platformdirs, "user_cache_dir", lambda *a, **k: calls.append(a) or "/somewhere/jev")
    assert cache_dir() == Path("/somewhere/jev") and calls
    monkeypatch.setenv("JEV_MEMORY_FILE", "/tmp/mine.json")
    assert memory_file() == Path("/tmp/mine.json")
    monkeypatch.setenv("JEV_CACHE_DIR", "/tmp/jevcache")
    assert cache_dir() == Path("/tmp/jevcache")


