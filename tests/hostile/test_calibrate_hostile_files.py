"""``jev calibrate`` on files nobody checked: every line that is not a labelled answer is one line naming the
file and the line, exit 2, never a traceback; probabilities below 0, above 1 or all 0 are refused, not fitted;
a yes/no's labels may be booleans. ``--out`` and ``--plot`` write regular files only: a symbolic link, a FIFO,
a folder or a device is refused before anything is read (its target never overwritten, no hang), and
``--plot NAME`` writes NAME itself."""

from __future__ import annotations

import importlib.util
import json
import os
import random
from pathlib import Path

import pytest

from jev_shared.calibration import Calibrator
from jev_shared.cli import main

pytestmark = pytest.mark.timeout(120)


def _answers(n: int = 40, yes_no: bool = False) -> list[dict]:
    rng = random.Random(7)
    rows = []
    for _ in range(n):
        p = rng.random()
        if yes_no:
            rows.append({"probabilities": {"true": p, "false": 1 - p}, "label": rng.random() < p,
                         "question_id": "spam"})
        else:
            rows.append({"probabilities": {"a": p, "b": 1 - p}, "label": "a" if rng.random() < p else "b",
                         "question_id": "team"})
    return rows


def _file(tmp_path: Path, rows: list, name: str = "labelled.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _calibrate(capsys, *argv: str) -> tuple[int, str]:
    status = main(["calibrate", *argv])
    return status, capsys.readouterr().err.strip()


def test_boolean_labels_for_a_yes_no_are_its_true_and_false(tmp_path, capsys):
    """Was: ValueError 'True' is not in list, a traceback."""
    labelled, out = _file(tmp_path, _answers(yes_no=True)), tmp_path / "cal.json"
    plot = ["--plot", str(tmp_path / "p.png")] if importlib.util.find_spec("matplotlib") else []  # the plots extra
    status, err = _calibrate(capsys, str(labelled), "--out", str(out), *plot)
    assert status == 0, err
    assert Calibrator.load(out).temperature("spam") > 0


BAD_LINES = {
    "a negative probability": {"probabilities": {"a": -0.2, "b": 1.2}, "label": "a"},
    "all zero": {"probabilities": {"a": 0.0, "b": 0.0}, "label": "a"},
    "NaN": {"probabilities": {"a": float("nan"), "b": 0.5}, "label": "a"},
    "Infinity": {"probabilities": {"a": float("inf"), "b": 0.0}, "label": "a"},
    "a huge number": {"probabilities": {"a": 1e308, "b": 1e308}, "label": "a"},
    "a label it lacks": {"probabilities": {"a": 0.5, "b": 0.5}, "label": "c"},
    "no label": {"probabilities": {"a": 0.5, "b": 0.5}},
    "a list of probabilities": {"probabilities": [0.5, 0.5], "label": "a"},
    "no options": {"probabilities": {}, "label": "a"},
    "one option": {"probabilities": {"a": 1.0}, "label": "a"},
    "probabilities as texts": {"probabilities": {"a": "0.5", "b": "0.5"}, "label": "a"},
    "a list for a label": {"probabilities": {"a": 0.5, "b": 0.5}, "label": ["a"]},
    "a list for a question id": {"probabilities": {"a": 0.5, "b": 0.5}, "label": "a", "question_id": [1]},
}


@pytest.mark.parametrize("what", sorted(BAD_LINES))
def test_a_line_that_is_no_labelled_answer_names_its_line(tmp_path, capsys, what):
    labelled = _file(tmp_path, [*_answers(5), BAD_LINES[what], *_answers(5)])
    status, err = _calibrate(capsys, str(labelled), "--out", str(tmp_path / "cal.json"),
                             "--questions", '{"spam": {"type": "noul", "instructions": "spam"}}')
    assert status == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert f"{labelled}:6:" in err, err
    assert not (tmp_path / "cal.json").exists()


@pytest.fixture
def labelled(tmp_path) -> Path:
    return _file(tmp_path, _answers())


def test_out_at_a_symbolic_link_leaves_its_target_alone(tmp_path, capsys, labelled):
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    link = tmp_path / "cal.json"
    link.symlink_to(target)
    status, err = _calibrate(capsys, str(labelled), "--out", str(link))
    assert status == 2 and "symbolic link" in err and str(link) in err, err
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("where", ["a FIFO", "a folder", "/dev/full"])
@pytest.mark.parametrize("flag", ["--out", "--plot"])
def test_out_and_plot_at_what_is_no_regular_file_are_refused(tmp_path, capsys, labelled, where, flag):
    path = {"a FIFO": tmp_path / "fifo", "a folder": tmp_path / "adir", "/dev/full": Path("/dev/full")}[where]
    if where == "a FIFO":
        os.mkfifo(path)  # written to, it would block until a reader came
    elif where == "a folder":
        path.mkdir()
    args = ["--out", str(path)] if flag == "--out" else ["--out", str(tmp_path / "cal.json"), "--plot", str(path)]
    status, err = _calibrate(capsys, str(labelled), *args)
    assert status == 2 and len(err.splitlines()) == 1, err
    assert f"{flag} {path}: not a regular file" in err, err
    assert not (tmp_path / "adir.png").exists()


def test_plot_writes_the_name_it_is_given(tmp_path, capsys, labelled):
    """Was: "wrote adir", and the picture in adir.png."""
    pytest.importorskip("matplotlib")
    status, err = _calibrate(capsys, str(labelled), "--out", str(tmp_path / "cal.json"), "--plot",
                             str(tmp_path / "adir"))
    assert status == 0, err
    assert (tmp_path / "adir").read_bytes()[:4] == b"\x89PNG" and not (tmp_path / "adir.png").exists()


NOUL = '{"spam": {"type": "noul", "instructions": "This is spam."}}'


def test_labelled_states_with_boolean_labels_are_answered(tmp_path, capsys):
    from tests.helpers.replies import chat, window
    from tests.hostile.fast_stub import FastStub

    states = _file(tmp_path, [{"state": f"message {i}", "label": i % 3 == 0} for i in range(12)])
    with FastStub(chat("Yes", {"content": window({"Yes": -0.4, "No": -1.2})}, "length")) as stub:
        status, err = _calibrate(capsys, str(states), "--questions", NOUL, "--backend-url", stub.base_url,
                                 "--model", "m", "--out", str(tmp_path / "cal.json"), "--plot", str(tmp_path / "p"))
        assert status == 0 and stub.n_requests >= 12, err


def test_a_state_whose_label_its_question_cannot_answer_is_refused_before_any_request(tmp_path, capsys):
    from tests.hostile.fast_stub import FastStub

    states = _file(tmp_path, [*({"state": f"m{i}", "label": True} for i in range(5)), {"state": "x", "label": "maybe"}])
    with FastStub({}) as stub:
        status, err = _calibrate(capsys, str(states), "--questions", NOUL, "--backend-url", stub.base_url,
                                 "--model", "m", "--out", str(tmp_path / "cal.json"))
        assert stub.n_requests == 0
    assert status == 2 and f"{states}:6:" in err and "maybe" in err, err
