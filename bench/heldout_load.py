"""The held-out runs offline: which saved files are runs, their decisions pooled, and the calibration maps tried.

``bench/heldout_runs/`` holds more than ``bench/heldout.py``'s runs (the router bench's, the variants
bench's, JSON lines of printed figures, shipped calibrations), so ``heldout_fit.py`` given
``bench/heldout_runs/*.json*`` reads only the files that are runs: a ``heldout.py`` run (``meta`` and
``decisions``), or a ``heldout_variants.py`` run of scores asked by their level names (``variant:
"levelnames"``: each row read back as a score's decision keyed by the level names, as the engine asks a 3-level
score) made with ``--no-calibration`` (``"calibrated": false``). Every other file is skipped, not read: a
levelnames run answered calibrated (``h1-levelnames-15``, ``h4-levelnames-60``) saved as ``raw`` the calibrated
answer times the prior, so its "raw" holds the shipped map's temperature and a fit on it would fit the map twice.

Where two files hold the same item (set, setting, item id), the later file's answer replaces the
earlier one's, as ``heldout_router.py --table`` pools (give the files oldest first), but a 3-level
score's answer by level names is kept over one by digits in any order.

The maps (``CANDIDATES``, bench/heldout_fit.py's FITS): each is a small
:class:`jev_shared.calibration.map.FeatureMap` (a temperature, or top-label scaling, whose numbers depend on
features the engine knows at run time for any question), fitted by log loss on the records of the sets it is
given; ``heldout_fit.loo`` judges each set by a fit on the others. The names say the form and the features:
``T(log_k, examples)`` is a temperature that depends on the number of options and on whether the question has
examples.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from heldout import Decision, read_run

from jev_shared.calibration import GLOBAL, Calibrator, Record
from jev_shared.calibration.map import Context
from jev_shared.calibration.map_fit import Labelled, fit_temperature_map, fit_top_map

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


#: The levels of a score the engine asks by their names (``labels.NAMED_SCORE_LEVELS``).
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


#: The ridge toward the identity map (in answers' worth of log loss): keeps weights the sets cannot pin
#: down near 0. Not tuned per candidate.
L2 = 1.0


def labelled(records: Sequence[Record]) -> list[Labelled]:
    return [(list(r.probabilities.values()), list(r.probabilities).index(r.label), r.context or Context())
            for r in records]


def _finish(cal: Calibrator, records: Sequence[Record]) -> Calibrator:
    """The gate for 95% precision, as every shipped calibration carries one."""
    report = cal.evaluate(records)
    cal.thresholds = {GLOBAL: report.overall.threshold}
    return cal


def temperature_map(features: Sequence[str]) -> Callable[[list[Record]], Calibrator]:
    """A temperature ``1 / exp(w · f)`` over ``"1"`` and ``features``."""
    def fit(records: list[Record]) -> Calibrator:
        fmap = fit_temperature_map(labelled(records), ("1", *features), l2=L2)
        return _finish(Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}, target=0.95), records)
    return fit


def top_map(slope: Sequence[str], shift: Sequence[str]) -> Callable[[list[Record]], Calibrator]:
    """Top-label scaling: ``σ((a · f)·logit p + (b · g))`` over ``"1"`` and the features given."""
    def fit(records: list[Record]) -> Calibrator:
        fmap = fit_top_map(labelled(records), ("1", *slope), ("1", *shift), l2=L2)
        return _finish(Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}, target=0.95), records)
    return fit


def correctness_map(features: Sequence[str], logit: bool = True, l2: float = L2) -> Callable[[list[Record]], Calibrator]:
    """A correctness model: P(the top answer is right) by logistic regression on ``features``
    (and the top's logit when ``logit``); the top probability becomes it, the rest keep their ratios. The
    ``top`` form with the features in its shift: it ships in the same file."""
    def fit(records: list[Record]) -> Calibrator:
        fmap = fit_top_map(labelled(records), ("1",) if logit else (), ("1", *features), l2=l2)
        return _finish(Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}, target=0.95), records)
    return fit


#: The correctness model's inputs: the top's log probability, its margin over the runner-up, the answer's
#: spread, the number of options, the kind, examples, and how far the prior divided out leans (0: uniform).
CORRECT_FEATURES = ("log_top", "margin", "entropy", "log_k", "noul", "score", "examples", "prior_lean")


def _name(form: str, *groups: Sequence[str]) -> str:
    return form + "".join("(" + ", ".join(g) + ")" for g in groups)


#: The candidates: a temperature on the number of options and on examples, on the answer's spread,
#: on the prior's lean; top-label scaling with the same.
CANDIDATES: dict[str, Callable[[list[Record]], Calibrator]] = {
    _name("T", fs): temperature_map(fs) for fs in (
        ("log_k",), ("examples",), ("log_k", "examples"), ("noul", "score", "examples"), ("entropy",),
        ("raw_entropy",), ("log_k", "examples", "entropy"), ("log_k", "examples", "prior_entropy"),
        ("log_k", "examples", "shift"), ("entropy", "log_k"), ("entropy", "examples"), ("entropy", "prior_entropy"),
        ("entropy", "noul"), ("entropy", "log_k", "examples", "prior_entropy"))
} | {
    _name("top", sl, sh): top_map(sl, sh) for sl, sh in (
        ((), ()), ((), ("log_k",)), (("log_k",), ("log_k",)), ((), ("log_k", "examples")),
        (("log_k", "examples"), ("log_k", "examples")), ((), ("log_k", "examples", "entropy")),
        ((), ("log_k", "examples", "prior_entropy")), ((), ("log_k", "examples", "shift")),
        ((), ("noul", "score", "examples")), (("entropy",), ("entropy",)),
        ((), ("log_k", "examples", "prior_entropy", "entropy")))
} | {
    "P(right) on all": correctness_map(CORRECT_FEATURES, logit=False),
    "P(right) on logit + all": correctness_map(CORRECT_FEATURES),
    "P(right) on logit + spread + kind": correctness_map(("margin", "entropy", "noul", "score", "examples")),
    "P(right) on logit + all but the prior": correctness_map(CORRECT_FEATURES[:-1]),
    "P(right) on logit + all, prior_entropy for prior_lean": correctness_map((*CORRECT_FEATURES[:-1], "prior_entropy")),
    "P(right) on logit + all, ridge 10": correctness_map(CORRECT_FEATURES, l2=10.0),
    "P(right) on logit + all + debias moved": correctness_map((*CORRECT_FEATURES, "shift", "raw_entropy")),
}
