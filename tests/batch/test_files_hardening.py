"""Careless outputs and broken inputs for ``jev decide --input``: every one is
refused with exit 2 and one clear message before anything is sent, and a disk that fills mid-run
ends the run with what was written kept and resumable.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from jev_shared.batch import files
from tests.batch.conftest import QUESTIONS
from tests.batch.test_cli_batch import jev_cmd, log_lines, write_jsonl

ROWS = [{"id": f"t{i}", "state": f"ticket {i} want=billing truth=yes"} for i in range(20)]


def decide_to(stub, tmp_path: Path, output: str, inp: Path | None = None, **run) -> subprocess.CompletedProcess:
    qpath = tmp_path / "questions.json"
    qpath.write_text(json.dumps(QUESTIONS))
    inp = inp or write_jsonl(tmp_path / "in.jsonl", ROWS[:3])
    return subprocess.run([*jev_cmd(), "decide", "--input", str(inp), "--questions", str(qpath), "--output", output,
                           "--backend-url", stub.base_url, "--model", "m", "--no-progress"],
                          capture_output=True, text=True, timeout=60, **run)


def refusal(out: subprocess.CompletedProcess) -> str:
    """The one message of a bad-input exit: exit 2, a JSON error line on stderr, no traceback."""
    assert out.returncode == 2, (out.returncode, out.stderr[-2000:])
    assert "Traceback" not in out.stderr
    return json.loads(out.stderr.strip().splitlines()[-1])["error"]["message"]


@pytest.mark.slow
def test_dev_full_is_refused_at_once_without_reading_it(stub, tmp_path):
    out = decide_to(stub, tmp_path, "/dev/full")
    assert "not a regular file" in refusal(out) and stub.requests == 0


@pytest.mark.parametrize("target, says", [
    ("{tmp}", "is a directory"),
    ("{tmp}/plain.txt/answers.jsonl", "is a file, not a directory"),
    ("{tmp}/plain.txt/deeper/answers.jsonl", "is a file, not a directory"),
    ("/proc/self/answers.jsonl", "under /proc"),
    ("/proc/answers.jsonl", "under /proc"),
    ("/sys/answers.jsonl", "under /sys"),
])
def test_outputs_that_cannot_be_a_log_exit_2_with_a_clear_message(stub, tmp_path, target, says):
    (tmp_path / "plain.txt").write_text("not a folder\n")
    out = decide_to(stub, tmp_path, target.format(tmp=tmp_path))
    assert says in refusal(out) and stub.requests == 0


def test_a_log_with_an_endless_line_is_refused_not_read_into_memory(stub, tmp_path, monkeypatch):
    log = tmp_path / "answers.jsonl"
    with log.open("wb") as f:  # one line of 9 MiB, past the 8 MiB bound: no newline anywhere
        f.write(b"x" * (9 * 1024 * 1024))
    out = decide_to(stub, tmp_path, str(log))
    assert f"{log}:1: a line longer than {files.MAX_LINE_BYTES} bytes" in refusal(out) and stub.requests == 0


def test_read_log_reads_at_most_the_bound_from_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 1000)
    log = tmp_path / "answers.jsonl"
    log.write_text(json.dumps({"id": "a", "answers": {}, "error": None}) + "\n" + "y" * 5000)
    with pytest.raises(files.OutputError, match=r"answers.jsonl:2: a line longer than 1000 bytes"):
        files.read_log(log)


def test_invalid_utf8_in_jsonl_input_names_file_and_line(stub, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_bytes(b'{"id": 1, "state": "fine"}\n{"id": 2, "state": "fine"}\n{"id": 3, "state": "caf\xe9"}\n')
    message = refusal(decide_to(stub, tmp_path, str(tmp_path / "answers.jsonl"), inp=inp))
    assert f"{inp}:3: not UTF-8 (byte 0xe9" in message and stub.requests == 0


def test_invalid_utf8_in_csv_input_names_file_and_line(stub, tmp_path):
    inp = tmp_path / "in.csv"
    inp.write_bytes(b"id,text\n1,fine\n2,fine\n3,\xff\xfe broken\n")
    message = refusal(decide_to(stub, tmp_path, str(tmp_path / "answers.jsonl"), inp=inp))
    assert f"{inp}:4: not UTF-8" in message and stub.requests == 0


def _small_files(limit: int):
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit, write() fails with EFBIG, as on a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_FSIZE semantics")
def test_a_disk_that_fills_mid_run_ends_it_clearly_and_the_rerun_resumes(stub, tmp_path):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    log = tmp_path / "answers.jsonl"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    out = decide_to(stub, tmp_path, str(log), inp=inp, preexec_fn=_small_files(4000), env=env)
    assert out.returncode == 74, out.stderr[-2000:]
    assert "cannot write" in out.stderr and "rerun the same command to resume" in out.stderr
    assert "Traceback" not in out.stderr
    kept = log.read_bytes().count(b"\n")  # whole lines written before the disk filled (a torn tail is cut on rerun)
    assert 0 < kept < len(ROWS)
    again = decide_to(stub, tmp_path, str(log), inp=inp)
    assert again.returncode == 0, again.stderr[-2000:]
    ids = [rec["id"] for rec in log_lines(log)]
    assert sorted(ids) == sorted(r["id"] for r in ROWS) and len(ids) == len(set(ids))
