"""bench/: one entry point (``python -m bench NAME``) whose registry names a script that exists, a table in
bench/README.md that matches ``python -m bench --list``, and at most 25 Python files outside its data."""

from __future__ import annotations

import runpy
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench"


def registry() -> dict:
    return runpy.run_path(str(BENCH / "__main__.py"), run_name="bench_registry")


def test_every_bench_names_a_script_that_has_its_subcommand() -> None:
    for name, bench in registry()["BENCHES"].items():
        script = BENCH / bench.file
        assert script.exists(), name
        assert not bench.sub or f'"{bench.sub}": main_{bench.sub}' in script.read_text(), name


def test_the_readme_table_is_the_list() -> None:
    listed = subprocess.run([sys.executable, "-m", "bench", "--list"], cwd=BENCH.parent, capture_output=True,
                            text=True, check=True).stdout.strip()
    readme = (BENCH / "README.md").read_text()
    assert listed == readme.split("-->\n", 1)[1].split("\n<!-- /bench-table -->")[0].strip()


def test_at_most_25_python_files_outside_the_data() -> None:
    data = (BENCH / "data", BENCH / "heldout_runs")
    assert len([p for p in BENCH.rglob("*.py") if not p.is_relative_to(data[0]) and not p.is_relative_to(data[1])]) <= 25
