"""The files that can open the gateway's door or change its answers (``--api-key-file``, ``--calibration``) are
read whole before anything starts: one that would leave the door open (no key in a key file) or answer with
numbers that are not numbers (NaN, Infinity) is refused in one line naming the file and the line, exit 2, with
no backend, model or socket started. A key that cannot be sent as written is refused the same way, never echoed."""

from __future__ import annotations

import json

import pytest

import jev_shared.cli.backends as cli_backends
import jev_shared.cli.serve as cli_serve
from jev_shared import DecisionSets
from jev_shared.calibration import Calibrator
from jev_shared.cli import main
from jev_shared.gateway.sets import load_calibration

pytestmark = pytest.mark.timeout(60)
SERVE = ["serve", "--backend-url", "http://127.0.0.1:9/v1", "--model", "m"]
SETS = {"format": "jev-decision-sets/1", "coverage": 0.9, "n": 10, "thresholds": {"*": 0.5},
        "options": ["billing", "tech"]}


@pytest.fixture
def refused(monkeypatch, capsys):
    """``refused(*flags)`` -> the one stderr line of ``jev serve`` refusing at the door (nothing may start)."""
    def started(*a, **k):
        raise AssertionError("started a backend on a file that should have been refused")

    monkeypatch.setattr(cli_serve, "backends", started)
    monkeypatch.setattr(cli_backends, "sync_client", started)
    monkeypatch.delenv("JEV_API_KEYS", raising=False)

    def run(*flags: str) -> str:
        status = main([*SERVE, *flags])
        err = capsys.readouterr().err.strip()
        assert status == 2, err
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err
        return err

    return run


def test_a_key_file_of_comments_alone_is_refused(refused, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("# none yet\n\n   # still none\n")
    err = refused("--api-key-file", str(keys))
    assert str(keys) in err and "no key" in err


@pytest.mark.parametrize("line", ["abc#def", "abc def", "tab\tkey", "bell\x07key"])
def test_a_key_that_cannot_be_sent_as_written_names_its_line_not_the_key(refused, tmp_path, line):
    keys = tmp_path / "keys"
    keys.write_text(f"# ops\ngood-key\n{line}\n")
    err = refused("--api-key-file", str(keys))
    assert f"{keys}:3:" in err and line not in err


def test_a_key_with_a_space_in_the_environment_is_refused(refused, monkeypatch):
    monkeypatch.setenv("JEV_API_KEYS", "one,two three")
    err = refused()
    assert "JEV_API_KEYS" in err and "two" not in err


def test_comments_after_a_key_and_whole_line_comments_still_read(tmp_path, monkeypatch):
    from jev_shared.gateway import load_keys

    monkeypatch.delenv("JEV_API_KEYS", raising=False)
    keys = tmp_path / "keys"
    keys.write_text("# team\nkey-a  # ops\n\tkey-b\n")
    assert load_keys(keys) == {"key-a", "key-b"}


def _calibration(tmp_path, body: dict) -> str:
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(body, indent=2))  # NaN and Infinity as Python's json writes them
    return str(path)


NAN = float("nan")


@pytest.mark.parametrize("body, line", [
    ({"format": "jev-calibration/1", "temperatures": {"*": 1.0}, "biases": {"team": {"billing": 0.2, "tech": NAN}}},
     9),
    ({"format": "jev-calibration/1", "temperatures": {"*": float("inf")}}, 4),
    ({"format": "jev-calibration/1", "temperatures": {"*": 1.0}, "tops": {"*": [1.0, NAN]}}, 9),
    ({"format": "jev-calibration/1", "temperatures": {"*": 1.0}, "thresholds": {"*": NAN}}, 7),
    ({"decision_sets": {**SETS, "thresholds": {"*": NAN}}}, 7),
])
def test_a_calibration_with_a_non_finite_number_names_the_file_and_line(refused, tmp_path, body, line):
    path = _calibration(tmp_path, body)
    err = refused("--calibration", path)
    assert f"{path}:{line}:" in err and "finite" in err, err


def test_the_library_loads_a_calibration_file_by_the_same_rule(tmp_path):
    path = _calibration(tmp_path, {"format": "jev-calibration/1", "temperatures": {"*": 1.0, "team": -2}})
    with pytest.raises(ValueError, match=rf"{path}:5: temperatures\.team: must be a finite number above 0"):
        Calibrator.load(path)


def test_a_file_of_sets_alone_loads_and_keeps_the_gateways_calibration(tmp_path):
    path = _calibration(tmp_path, {"format": "jev-calibration/1", "decision_sets": {"team": SETS}})
    cal = load_calibration(path)
    assert cal.calibrator is None and set(cal.sets) == {"team"}
    assert Calibrator.load(path).temperatures == {"*": 1.0}  # a file with no temperature: none applied


@pytest.mark.parametrize("options", ["billing", [], ["billing"], ["a", "a"], [1, 2]])
def test_sets_whose_options_could_never_apply_are_refused_at_load(refused, tmp_path, options):
    path = _calibration(tmp_path, {"decision_sets": {"team": {**SETS, "options": options}}})
    assert "options" in refused("--calibration", path)
    with pytest.raises(ValueError, match="options"):
        DecisionSets.load_all(path)


@pytest.mark.parametrize("part", [{"tops": {"*": [1e300, -1e300]}},
                                  {"maps": {"*": {"form": "temperature", "slope": {"1": 1e300}}}},
                                  {"maps": {"*": {"form": "temperature", "slope": {"1": -1e300}}}},
                                  {"biases": {"*": {"a": 1e300, "b": -1e300}}}])
def test_extreme_but_finite_numbers_bend_an_answer_without_overflow(part):
    """A file that passes the check answers every question: its extreme numbers saturate, never raise."""
    from jev_shared import ChoiceAnswer

    cal = Calibrator.from_dict({"format": "jev-calibration/2", "temperatures": {"*": 1.0}, **part})
    answer = ChoiceAnswer(choice="b", probabilities={"a": 0.3, "b": 0.7}, confidence=0.4)
    probs = cal.apply(answer, "*").probabilities
    assert abs(sum(probs.values()) - 1.0) < 1e-9 and all(0.0 <= p <= 1.0 for p in probs.values())
