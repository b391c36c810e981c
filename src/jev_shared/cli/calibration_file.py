"""``--calibration FILE`` for ``jev decide``: the file ``jev calibrate`` writes, checked whole before any request
and applied as ``jev serve --calibration`` applies it, so the same question with the same file answers alike."""

from __future__ import annotations

import argparse
from typing import Any

from .checks import text


def add_calibration_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--calibration", metavar="FILE", type=text, default=None,
                   help="the file jev calibrate writes: its calibration replaces the shipped one and its decision "
                        "sets apply (checked whole before any request; the same file jev serve --calibration reads)")


def calibration_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The client's ``calibrator`` and ``sets`` from ``--calibration`` ({} without it); a ValueError or an OSError
    naming the file (and the line of a bad value) otherwise. With ``--label`` it is refused: a labelled run
    records the answers as the shipped calibration gives them, for ``jev calibrate`` to fit on top of."""
    path = getattr(args, "calibration", None)
    if path is None:
        return {}
    if getattr(args, "label", None):
        raise ValueError("--calibration with --label: a labelled run records the answers as the model's shipped "
                         "calibration gives them, for jev calibrate to fit on top of; drop one of them")
    from jev_shared.gateway.sets import load_calibration

    loaded = load_calibration(path)
    kwargs: dict[str, Any] = {"sets": dict(loaded.sets)} if loaded.sets else {}
    if loaded.calibrator is not None:
        kwargs["calibrator"] = loaded.calibrator
    return kwargs
