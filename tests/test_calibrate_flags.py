"""`jev calibrate`'s own flags are checked at the door like serve's and decide's: one line, exit 2, nothing read."""

from __future__ import annotations

import pytest

from tests.helpers.cli import jev, one_line_exit_2

pytestmark = pytest.mark.slow  # every test here starts a subprocess or a server (seconds each): scripts/test.sh --full runs them

BAD = [
    ("--coverage", "1.5"), ("--coverage", "0"), ("--coverage", "1"), ("--coverage", "nan"),
    ("--target", "-0.1"), ("--target", "inf"), ("--questions", ""),
    ("--seed", "-1"), ("--seed", "1.5"), ("--seed", "nan"), ("--seed", "x"),
    ("--shrink", "-1"), ("--shrink", "nan"), ("--shrink", "1e9"),
]


@pytest.mark.parametrize(("flag", "value"), BAD)
def test_a_bad_calibrate_flag_is_one_line_and_exit_2(tmp_path, flag, value):
    labelled = tmp_path / "labelled.jsonl"   # never read: the flag is refused first
    out = jev("calibrate", str(labelled), f"{flag}={value}")
    one_line_exit_2(out, flag)


def test_calibrate_help_shows_each_default_once():
    text = jev("calibrate", "--help").stdout
    assert "(default: 0.9)" in text and "(default 0.9)" not in text
