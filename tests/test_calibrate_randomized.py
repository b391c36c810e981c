"""`jev calibrate --randomized [--seed N]`: the decision sets' boundary drawn so coverage averages the target
exactly; the report and the written file say which boundary was used (and the seed that repeats the draw)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from jev_shared import DecisionSets
from jev_shared.cli import main
from tests.helpers.cli import jev, one_line_exit_2
from tests.test_calibrate_sets_cli import labelled


def calibrate(tmp_path: Path, capsys, name: str, *flags: str) -> tuple[str, dict]:
    """The report's boundary line and the file's decision sets, for the recorded atis answers at 80%."""
    out = tmp_path / f"{name}.json"
    argv = ["calibrate", str(labelled(tmp_path)), "--out", str(out), "--coverage", "0.8", *flags]  # no PNG:
    # the llama_index pass has no plots extra
    assert main(argv) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("boundary"))
    return line, json.loads(out.read_text())["decision_sets"]


@pytest.mark.slow
def test_randomized_draws_the_boundary_and_says_so(tmp_path, capsys):
    line, plain = calibrate(tmp_path, capsys, "plain")
    assert "conservative: coverage at least 80%, up to 1/(n+1) above (0.6 points at n = 180)" in line
    assert plain["randomized"] is False and "seed" not in plain

    # n = 180 at 0.8: the 145th smallest score with probability 0.8, else the 144th. Seed 0 draws 0.844: the 144th,
    # a higher threshold (smaller sets); seed 1 draws 0.134: the 145th, the conservative boundary itself.
    line, low = calibrate(tmp_path, capsys, "low", "--randomized", "--seed", "0")
    assert "randomized (seed 0): coverage 80% on average over the draw" in line and "--seed 0 repeats" in line
    assert low["randomized"] is True and low["seed"] == 0
    assert low["thresholds"]["*"] > plain["thresholds"]["*"]
    line, high = calibrate(tmp_path, capsys, "high", "--randomized", "--seed", "1")
    assert high["seed"] == 1 and high["thresholds"] == plain["thresholds"]
    assert DecisionSets.load(tmp_path / "low.json").seed == 0  # the seed is read back with the sets


@pytest.mark.slow
def test_randomized_without_a_seed_prints_and_saves_the_one_it_drew(tmp_path, capsys):
    line, drawn = calibrate(tmp_path, capsys, "drawn", "--randomized")
    seed = int(re.search(r"seed (\d+)\):", line)[1])
    assert drawn["seed"] == seed and drawn["randomized"] is True
    _, again = calibrate(tmp_path, capsys, "again", "--randomized", "--seed", str(seed))
    assert again["thresholds"] == drawn["thresholds"]  # the printed seed repeats the fit


@pytest.mark.slow
def test_a_seed_without_randomized_is_refused_before_reading(tmp_path):
    out = jev("calibrate", str(tmp_path / "never-read.jsonl"), "--seed", "3")
    one_line_exit_2(out, "--seed")
    assert "--randomized" in out.stderr


def test_a_saved_seed_must_be_an_integer_or_a_text():
    sets = DecisionSets.fit([{"A": 0.9 - i / 50, "B": 0.1 + i / 50} for i in range(20)], ["A"] * 20, 0.8,
                            randomized=True, seed=7)
    assert DecisionSets.from_dict(sets.to_dict()).seed == 7 and "seed 7" in repr(sets)
    with pytest.raises(ValueError, match="seed"):
        DecisionSets.from_dict({**sets.to_dict(), "seed": 1.5})
