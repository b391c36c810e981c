"""`jev calibrate` fits decision sets: held-out coverage, set size and share decided alone, the sets saved
in the calibration file, and the reliability diagram and set-size chart written as a PNG."""

from __future__ import annotations

import gzip
import json
import struct
from pathlib import Path

import pytest

from jev_shared import DecisionSets
from jev_shared.calibration import Calibrator
from jev_shared.cli import main

RECORDED = Path(__file__).resolve().parent.parent / "bench" / "heldout_runs" / "decision-sets.json.gz"


def labelled(tmp_path: Path) -> Path:
    """The embedded 0.5B's recorded answers on atis (17 options), as `jev calibrate` reads them."""
    rows = json.loads(gzip.decompress(RECORDED.read_bytes()))["answers"]["qwen2.5-coder-0.5b"]["atis"]["rows"]
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps({"probabilities": p, "label": y, "question_id": "intent"}) + "\n"
                            for p, y in rows))
    return path


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_calibrate_prints_set_figures_and_saves_the_sets(tmp_path, capsys):
    out = tmp_path / "cal.json"
    assert main(["calibrate", str(labelled(tmp_path)), "--out", str(out), "--coverage", "0.8"]) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("decision sets"))
    assert "at 80% (held out): coverage" in line and "mean set size" in line and "decided alone" in line
    coverage = float(line.split("coverage ")[1].split("%")[0]) / 100
    assert 0.7 <= coverage <= 0.95
    sets = DecisionSets.load(out)
    assert sets.coverage == 0.8 and sets.n == 180 and len(sets.options) == 17
    assert Calibrator.load(out).temperature("intent") > 0  # the calibration is still in the same file


def test_calibrate_writes_the_png(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "calibration.png"
    assert main(["calibrate", str(labelled(tmp_path)), "--out", str(tmp_path / "cal.json"), "--plot", str(png)]) == 0
    assert f"wrote {png}" in capsys.readouterr().out
    assert png_size(png) == (1000, 420)  # figsize (10, 4.2) at 100 dpi: both charts
    assert png.stat().st_size > 20_000  # drawn, not blank


def test_calibrate_refuses_a_coverage_outside_0_1(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:   # at the door, by the flag's own check
        main(["calibrate", str(labelled(tmp_path)), "--out", str(tmp_path / "c.json"), "--coverage", "1.5"])
    assert refused.value.code == 2
    assert "--coverage" in capsys.readouterr().err


def test_the_report_says_how_far_one_fits_coverage_strays_and_how_many_labels_tighten_it():
    from jev_shared.cli.calibrate import spread_line

    line = spread_line(30, 0.9)
    assert "±5.3% from 90% at n = 30" in line and "68 more labels bring it to ±3%" in line
    assert spread_line(200, 0.9).endswith("within ±3%")
