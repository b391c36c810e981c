"""Every file the commands read is bounded and a regular file; a bad one is one line
on stderr and exit 2, never a traceback, a MemoryError or a hang (each command runs in a child process,
bounded in time, so a regression cannot take this process's memory)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.cli import jev
from tests.helpers.cli import one_line_exit_2 as _one_line_exit_2

pytestmark = pytest.mark.slow  # every test here starts a subprocess or a server (seconds each): scripts/test.sh --full runs them

QUESTIONS = json.dumps({"spam": {"type": "noul", "instructions": "This is spam."}})
NO_BACKEND = ["--backend-url", "http://127.0.0.1:9/v1", "--model", "m"]  # never reached: the files fail first


@pytest.fixture
def fifo(tmp_path: Path) -> str:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "folder"])
def test_decide_questions_that_are_not_a_regular_file(where: str, fifo: str, tmp_path: Path):
    path = {"/dev/zero": "/dev/zero", "fifo": fifo, "folder": str(tmp_path)}[where]
    _one_line_exit_2(jev("decide", "--questions", path, "--state", "x", *NO_BACKEND), path)


@pytest.mark.parametrize("where", ["/dev/zero", "fifo"])
def test_decide_state_at_a_file_that_is_not_a_regular_file(where: str, fifo: str):
    path = "/dev/zero" if where == "/dev/zero" else fifo
    _one_line_exit_2(jev("decide", "--questions", QUESTIONS, "--state", "@" + path, *NO_BACKEND), path)


def test_decide_a_questions_file_over_the_bound(tmp_path: Path):
    from jev_shared.files import MAX_READ_BYTES

    big = tmp_path / "q.json"
    with big.open("wb") as f:
        f.truncate(MAX_READ_BYTES + 1)  # sparse: no disk used
    _one_line_exit_2(jev("decide", "--questions", str(big), "--state", "x", *NO_BACKEND), "larger than")


@pytest.mark.parametrize("where", ["/dev/zero", "fifo"])
def test_decide_batch_input_and_questions_that_are_not_regular_files(where: str, fifo: str, tmp_path: Path):
    path = "/dev/zero" if where == "/dev/zero" else fifo
    states = tmp_path / "in.jsonl"
    states.write_text('{"id": 1, "state": "x"}\n')
    out = str(tmp_path / "out.jsonl")
    _one_line_exit_2(jev("decide", "--questions", path, "--input", str(states), "--output", out, *NO_BACKEND), path)
    link = tmp_path / "in-fifo.jsonl"
    link.symlink_to(path)  # a .jsonl name on a FIFO or a device: refused, not read
    _one_line_exit_2(jev("decide", "--questions", QUESTIONS, "--input", str(link), "--output", out, *NO_BACKEND),
                     str(link))


@pytest.mark.parametrize("where", ["/dev/zero", "fifo", "missing"])
def test_serve_api_key_file_that_cannot_be_read(where: str, fifo: str, tmp_path: Path):
    path = {"/dev/zero": "/dev/zero", "fifo": fifo, "missing": str(tmp_path / "missing.txt")}[where]
    _one_line_exit_2(jev("serve", "--api-key-file", path, "--port", "1", *NO_BACKEND), path)


def test_jev_memory_file_dev_zero_is_a_warning_not_a_crash(tmp_path: Path):
    """The CLI's memory: the warning and an empty memory, then the command goes on (here to its bad state file)."""
    env = {"JEV_MEMORY_FILE": "/dev/zero", "JEV_NO_CACHE": ""}
    out = jev("decide", "--questions", QUESTIONS, "--state", "@" + str(tmp_path / "missing"), *NO_BACKEND, env=env)
    assert out.returncode == 2 and "MemoryError" not in out.stderr and "Traceback" not in out.stderr, out.stderr
