"""The held-out benches read saved priors at the strength they were saved at.

``bench/heldout_variants.py`` runs with ``debias="auto"``, so the prior it saves is already raised to the
model's strength (the 1.5B's nouls: the square root); its "whole" must divide by the prior itself, not by
that saved one again. ``bench/heldout_load.py`` reads a levelnames run only where its ``raw`` is exact
(answers uncalibrated): a calibrated run's raw holds the shipped map's temperature.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import heldout_load  # noqa: E402
import heldout_variants  # noqa: E402

#: A yes/no whose raw readout leans "false"; the content-free prior leans "false" harder.
PRIOR = [0.2, 0.8]
ROW = {"set": "sst2", "label": "true", "raw": {"true": 0.3, "false": 0.7}, "answer": "false"}


def test_whole_divides_by_the_prior_itself_whatever_it_was_saved_at() -> None:
    saved_half = {**ROW, "prior": [p ** 0.5 for p in PRIOR], "strength": 0.5}
    saved_whole = {**ROW, "prior": PRIOR, "strength": 1.0}
    assert heldout_variants.whole_prior(saved_half, 0.5) == pytest.approx(PRIOR)
    # 0.3 / 0.2 against 0.7 / 0.8: divided by the whole prior the answer turns to "true"
    for row in (saved_half, saved_whole):
        saved = heldout_variants.saved_strength(row, "qwen2.5-coder-1.5b", "nouldesc")
        assert heldout_variants.at_strength(row, 1.0, saved=saved) == "true"
    # divided by its square root it stays "false": 0.3 / 0.447 < 0.7 / 0.894; raising the saved square root
    # again (the bug) made this "whole" a half
    assert heldout_variants.at_strength(saved_half, 1.0, saved=1.0) == "false"


def test_a_row_without_its_strength_is_read_at_the_models_own() -> None:
    row = {**ROW, "prior": PRIOR}
    assert heldout_variants.saved_strength(row, "qwen2.5-coder-1.5b", "nouldesc") == 0.5  # the 1.5B's zero-shot noul
    assert heldout_variants.saved_strength(row, "qwen2.5-coder-0.5b", "nouldesc") == 1.0
    score = {**row, "set": "finphrasebank"}
    assert heldout_variants.saved_strength(score, "qwen2.5-coder-1.5b", "levelnames") == 1.0  # asked as a choice


def test_only_exact_levelnames_runs_are_read(tmp_path: Path) -> None:
    row = {"set": "finphrasebank", "item": "finphrasebank-0", "label": "2", "prior": [0.3, 0.4, 0.3],
           "answered": {"negative": 0.1, "neutral": 0.2, "positive": 0.7},
           "raw": {"negative": 0.1, "neutral": 0.25, "positive": 0.65}, "answer": "2", "ms": 1.0}
    exact, calibrated = tmp_path / "exact.json", tmp_path / "calibrated.json"
    exact.write_text(json.dumps({"variant": "levelnames", "calibrated": False, "model": "m", "rows": [row]}))
    calibrated.write_text(json.dumps({"variant": "levelnames", "model": "m", "rows": [row]}))
    decisions, _, read = heldout_load.load_runs([calibrated, exact], "m")
    assert read == [exact]
    assert [(d.label, d.notes) for d in decisions] == [("positive", {"asked_by": "level names"})]
