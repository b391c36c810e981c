"""``jev serve --calibration FILE``: the calibration and decision sets the gateway applies, and the set
each answer carries on the wire.

The file is the one ``jev calibrate`` writes (a :class:`~jev_shared.calibration.Calibrator`, and its
``decision_sets`` key: one :class:`~jev_shared.DecisionSets` for every question, ``"*"``, or one per
question id), read the way the library's recipe reads it: ``calibrator=Calibrator.load(FILE)`` where the
file holds a calibration, ``DecisionSets.load_all(FILE)`` where it holds sets. It is read once, bounded
(:func:`jev_shared.files.read_text`), and checked whole before the gateway starts: a file that is not one
is a ``ValueError`` (or an ``OSError``) of one line, which ``jev serve`` prints and exits 2 on.

An answer carries ``decision_set`` (its options in the set, most probable first) and ``abstains`` (the
set is not one option) when the file has sets for its question (by id; on the Decisions wire by the
question's ``name``, then its index; else ``"*"``) and the answer has the options they were fitted on.
Every other answer is sent as before, without the two fields.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jev_shared import DecisionSets
from jev_shared.calibration import ANSWERING, CalibrationFileError, Calibrator, located, non_finite
from jev_shared.files import read_text

#: The largest calibration file read (a regular file only; larger: ``FileReadError``, an OSError).
MAX_CALIBRATION_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Calibration:
    """What ``--calibration FILE`` holds: the calibration (None: the gateway's default) and the sets by id."""

    path: str
    calibrator: Calibrator | None = None
    sets: Mapping[str, DecisionSets] = field(default_factory=dict)

    def sets_for(self, *ids: str | None) -> DecisionSets | None:
        """The sets of the first id the file has sets for, else its ``"*"`` sets, else None."""
        for qid in (*ids, "*"):
            if qid is not None and qid in self.sets:
                return self.sets[qid]
        return None

    def wire(self, answer: Any, *ids: str | None) -> dict[str, Any] | None:
        """``{"decision_set": [...], "abstains": bool}`` for the answer, or None (no sets apply to it)."""
        sets = self.sets_for(*ids)
        if sets is None or not sets.applies_to(answer):
            return None
        chosen = sets.of(answer)
        return {"decision_set": chosen, "abstains": len(chosen) != 1}


def load_calibration(path: str | os.PathLike[str]) -> Calibration:
    """The file's calibration and decision sets, every part checked; a ValueError (one line: the file, and the line
    of a value that is not one) or an OSError. A file with sets and no calibration numbers (no temperatures,
    offsets, top-label scalings or maps) keeps the gateway's calibration and applies its sets."""
    where = os.fspath(path)
    text = read_text(where, MAX_CALIBRATION_BYTES)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{where}: not a calibration file (nested too deep)") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a JSON object, so not a calibration file")
    nan = non_finite({k: data[k] for k in ANSWERING if k in data})
    if nan is not None:
        raise located(where, text, CalibrationFileError("not a finite number: it would change every answer it "
                                                        "touches (NaN probabilities, a wrong choice)", nan))
    sets_alone = str(data.get("format", "")).startswith("jev-decision-sets/")  # DecisionSets.to_dict() dumped
    numbers = any(data.get(k) for k in CALIBRATING)
    calibrator = _calibrator(data, where, text) if numbers and not sets_alone else None
    if calibrator is None and "format" in data and not sets_alone:
        _calibrator(data, where, text)  # its format and thresholds checked all the same
    sets: dict[str, DecisionSets] = {}
    if "decision_sets" in data or calibrator is None:
        try:
            sets = DecisionSets.all_from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return Calibration(where, calibrator, sets)


#: The parts of a calibration file that make it a calibration (the gateway's own is replaced by it).
CALIBRATING = ("temperatures", "biases", "tops", "maps")


def _calibrator(data: dict[str, Any], where: str, text: str) -> Calibrator:
    """The file's calibration, every number in it finite and in its range (else a ValueError naming the line)."""
    try:
        return Calibrator.from_dict(data)
    except CalibrationFileError as exc:
        raise located(where, text, exc) from None
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{where}: not a calibration file ({type(exc).__name__}: {exc})") from None
