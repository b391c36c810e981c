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
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jev_shared import DecisionSets
from jev_shared.calibration import Calibrator
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
    """The file's calibration and decision sets, every part checked; a ValueError (one line) or OSError."""
    where = os.fspath(path)
    try:
        data = json.loads(read_text(where, MAX_CALIBRATION_BYTES))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{where}: not a JSON object, so not a calibration file")
    sets_alone = str(data.get("format", "")).startswith("jev-decision-sets/")  # DecisionSets.to_dict() dumped
    calibrator = _calibrator(data, where) if ("format" in data or "temperatures" in data) and not sets_alone else None
    sets: dict[str, DecisionSets] = {}
    if "decision_sets" in data or calibrator is None:
        try:
            sets = DecisionSets.all_from_dict(data)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return Calibration(where, calibrator, sets)


def _calibrator(data: dict[str, Any], where: str) -> Calibrator:
    """The file's calibration, its temperatures finite and above 0 (else a ValueError)."""
    try:
        cal = Calibrator.from_dict(data)
        temperatures = dict(cal.temperatures)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{where}: not a calibration file ({type(exc).__name__}: {exc})") from None
    for key, t in temperatures.items():
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ValueError(f"{where}: the temperature of {key!r} must be a finite number above 0, got {t!r}")
    return cal
