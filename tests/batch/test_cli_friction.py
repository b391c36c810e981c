"""The CLI's rough edges, in process against the loopback stub: an unreachable backend
named (without its credentials), the progress bar never drawn under "interrupted", review rows that
carry the item's text, decisions/s that counts the run and not the preparation."""

from __future__ import annotations

import json
import time

import pytest

import jev_shared.batch
from bench.batch_data import ROUTING
from jev_shared import SystemOneClient
from jev_shared.cli import main
from tests.batch.conftest import QUESTIONS

pytestmark = pytest.mark.timeout(120)


def run(*argv: str) -> int:
    try:
        return main(list(argv))
    except SystemExit as exc:
        return int(exc.code or 0)


def batch(stub, tmp_path, rows: list[dict], *extra: str, questions: dict | None = None) -> int:
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run("decide", "--input", str(inp), "--questions", json.dumps(questions or QUESTIONS),
               "--output", str(tmp_path / "answers.jsonl"), "--backend-url", stub.base_url, "--model", "m", *extra)


@pytest.mark.slow
def test_an_unreachable_backend_is_named_without_its_credentials(capsys):
    status = run("decide", "--backend-url", "http://jev:s3cret-pw@127.0.0.1:9/v1?token=t0ken", "--model", "m",
                 "--state", "hi", "--questions", json.dumps(QUESTIONS))
    err = capsys.readouterr().err
    body = json.loads(err.strip().splitlines()[-1])["error"]
    assert status == 1 and body["backend"] == "http://127.0.0.1:9/v1"
    assert "(backend http://127.0.0.1:9/v1)" in body["message"]
    assert "s3cret" not in err and "t0ken" not in err


def test_the_bar_is_closed_before_interrupted_is_said(stub, tmp_path, capsys, monkeypatch):
    real = jev_shared.batch.stream_batch

    def interrupted(*a, **k):
        for n, result in enumerate(real(*a, **k)):
            if n == 1:
                raise KeyboardInterrupt
            yield result

    monkeypatch.setattr(jev_shared.batch, "stream_batch", interrupted)
    rows = [{"id": i, "state": f"want=billing {i}"} for i in range(4)]
    assert batch(stub, tmp_path, rows) == 130
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if line.strip()]
    assert "interrupted" in lines[-1], lines[-3:]  # nothing drawn after it
    assert any("item" in line and "/4" in line for line in lines[:-1])  # the bar was drawn, before


def test_review_rows_carry_the_items_text(stub, tmp_path, capsys):
    rows = [{"id": "k1", "state": "want=billing"}, {"id": "k2", "state": "want=nobody: no option in the window"}]
    assert batch(stub, tmp_path, rows, "--method", "grammar", questions=ROUTING) == 0
    review = [json.loads(line) for line in (tmp_path / "answers.review.jsonl").read_text().splitlines()]
    assert [(r["id"], r["state"], r["question"]) for r in review] == [
        ("k2", "want=nobody: no option in the window", "team")]


@pytest.mark.slow
def test_decisions_per_s_counts_the_run_not_the_preparation(stub, tmp_path, capsys, monkeypatch):
    prepare = SystemOneClient.prepare

    def slow_prepare(self, *a, **k):
        time.sleep(2.0)
        return prepare(self, *a, **k)

    monkeypatch.setattr(SystemOneClient, "prepare", slow_prepare)
    assert batch(stub, tmp_path, [{"id": i, "state": "want=billing"} for i in range(3)], "--no-progress") == 0
    run_totals = json.loads(capsys.readouterr().out)["run"]
    assert run_totals["decisions"] == 6 and run_totals["wall_s"] < 1.5, run_totals
