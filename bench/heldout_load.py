"""Which saved files are held-out runs, and their decisions pooled (issue 32).

``bench/heldout_runs/`` holds more than ``bench/heldout.py``'s runs (the router bench's, the variants
bench's, JSON lines of printed figures, shipped calibrations), so ``heldout_fit.py`` and
``heldout_carry.py`` given ``bench/heldout_runs/*.json*`` read only the files that are runs: a
``heldout.py`` run (``meta`` and ``decisions``), or a ``heldout_variants.py`` run of scores asked by
their level names (``variant: "levelnames"``: each row read back as a score's decision keyed by the
level names, as the engine asks a 3-level score since issue 32) made with ``--no-calibration``
(``"calibrated": false``). Every other file is skipped, not read: a levelnames run answered calibrated
(``h1-levelnames-15``, ``h4-levelnames-60``) saved as ``raw`` the calibrated answer times the prior, so
its "raw" holds the shipped map's temperature and a fit on it would fit the map twice.

Where two files hold the same item (set, setting, item id), the later file's answer replaces the
earlier one's, as ``heldout_router.py --table`` pools (give the files oldest first), but a 3-level
score's answer by level names is kept over one by digits in any order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from heldout import Decision, read_run

DATA = Path(__file__).resolve().parent / "data" / "public"


def _read(path: Path) -> dict[str, Any] | None:
    """The file's JSON object, or None where it is not one (JSON lines, text)."""
    try:
        data = json.loads(read_run(path))
    except (ValueError, OSError):
        return None
    return data if isinstance(data, dict) else None


def kind_of(data: dict[str, Any] | None) -> str | None:
    """``"decisions"`` (a heldout.py run), ``"levelnames"`` (scores by their level names, raw readout exact), or None."""
    if data is None:
        return None
    if isinstance(data.get("decisions"), list) and isinstance(data.get("meta"), dict):
        return "decisions"
    if data.get("variant") == "levelnames" and isinstance(data.get("rows"), list) and data.get("calibrated") is False:
        return "levelnames"
    return None


def run_model(path: Path) -> str | None:
    """The model a saved run was made on (a merged file: its first run's); None for a file that is no run."""
    return _model_of(_read(path))


def _model_of(data: dict[str, Any] | None) -> str | None:
    kind = kind_of(data)
    if data is None or kind is None:
        return None
    if kind == "levelnames":
        return str(data.get("model") or "qwen2.5-coder-0.5b")
    meta = data["meta"]
    return str(meta.get("model") or (meta.get("runs") or [{}])[0].get("model") or "qwen2.5-coder-0.5b")


#: The levels of a score the engine asks by their names (``labels.NAMED_SCORE_LEVELS``, issue 32).
NAMED_LEVELS = 3


def level_decisions(rows: Sequence[dict[str, Any]]) -> list[Decision]:
    """A levelnames run's rows as zero-shot score decisions, the label read onto its level's name: only the
    public sets' 3-level scores (asked so by the engine; 5-level ones by digits; sets kept outside
    ``data/public/``, such as ``poem_sentiment``, are in no fit)."""
    sets = json.loads((DATA / "sets.json").read_text())
    out = []
    for r in rows:
        names = list(r["answered"])
        if sets.get(r["set"], {}).get("kind") != "score" or len(names) != NAMED_LEVELS:
            continue
        label = names[int(r["label"])] if r["label"].isdigit() and int(r["label"]) < len(names) else r["label"]
        out.append(Decision(r["set"], sets.get(r["set"], {}).get("kind", "score"), 0, r["item"], label,
                            r["answered"], r.get("prior"), float(r.get("ms") or 0.0),
                            notes={"asked_by": "level names"}, raw=r.get("raw")))
    return out


def load_runs(paths: Sequence[Path], model: str | None = None) -> tuple[list[Decision], dict[str, Any], list[Path]]:
    """The decisions of the runs among ``paths`` (of ``model``, if given), a later file's answer replacing
    an earlier one's for the same item; the examples' rows of every run; the files read."""
    pooled: dict[tuple[str, int, str], Decision] = {}
    rows: dict[str, Any] = {}
    read: list[Path] = []
    for p in paths:
        data = _read(Path(p))
        kind = kind_of(data)
        if data is None or kind is None or (model and _model_of(data) != model):
            continue
        read.append(Path(p))
        if kind == "levelnames":
            ds = level_decisions(data["rows"])
        else:
            ds = [Decision(**d) for d in data["decisions"]]
            rows.update(data["meta"].get("heldout_rows", {}))
        for d in ds:  # a score asked by its level names (as the engine asks it) is kept over one by digits
            old = pooled.get((d.set, d.shots, d.item))
            if old is None or "asked_by" in d.notes or "asked_by" not in old.notes:
                pooled[(d.set, d.shots, d.item)] = d
    return list(pooled.values()), rows, read
