"""Decision sets: split conformal prediction sets over an answer's options, with a coverage guarantee.

From a few hundred labelled answers of one question (choice, score or noul), :meth:`DecisionSets.fit`
finds the probability an option needs to enter the set so that, on new answers drawn like the
labelled ones, the set holds the true option with probability at least ``coverage`` — whatever the
model's calibration. A set of one option is a decision the model can take alone; a set of more (or
none) is an abstention: ask a person, or take the fallback.

    sets = DecisionSets.fit(answers, truths, coverage=0.9)     # answers: Answer objects or {option: p}
    sets.of(answer)          # ["billing", "refunds"]: the options in the set, most probable first
    sets.abstains(answer)    # True: more than one option (or none)
    sets.save("calibration.json"); DecisionSets.load("calibration.json")

The score is LAC (least ambiguous set-valued classifier, Sadinle et al. 2019): ``1 - p(true option)``;
the threshold is its ``ceil((n+1)·coverage)``-th smallest value over the ``n`` labelled answers (the
split conformal quantile), and an option enters the set when its probability reaches ``1 - q``. Why LAC
and not APS: LAC gives the smallest sets on average for a given coverage, and its set is a threshold
on each option's own probability, so "a set of one" is the same rule as a gate's threshold on the top
probability; APS adapts better to hard items but needs randomisation for exact coverage (without it,
it over-covers, with larger sets). ``class_conditional=True`` fits one threshold per true option
(Mondrian conformal): coverage then holds for each option's items, at the cost of larger sets where
an option has few labelled answers (an option with too few gets threshold 0: always in the set).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .answers import Answer, NoulAnswer
from .files import read_text

FORMAT = "jev-decision-sets/1"
#: The key a calibration file (:class:`~jev_shared.calibration.Calibrator`) holds decision sets under.
KEY = "decision_sets"
#: The fewest labelled answers a fit takes (fewer: a typed ValueError); 200 or more are recommended.
MIN_ANSWERS = 10
#: An answer as its distribution over option keys; a bare float is a noul's P(true).
Probabilities = Mapping[str, float] | float
Truth = str | bool | int


def distribution(answer: Answer | Probabilities) -> dict[str, float]:
    """The answer's probabilities by option key ("true"/"false" for a noul, "0".."n" for a score)."""
    if isinstance(answer, NoulAnswer):
        return {"true": answer.noul, "false": 1.0 - answer.noul}
    if isinstance(answer, (int, float)):
        return {"true": float(answer), "false": 1.0 - float(answer)}
    if isinstance(answer, Mapping):
        return {str(k): float(v) for k, v in answer.items()}
    return dict(answer.probabilities)


def truth_key(truth: Truth) -> str:
    """A truth as its option key: a bool as "true"/"false", a score level as "0".."n", a choice as given."""
    if isinstance(truth, bool):
        return "true" if truth else "false"
    return str(truth)


def conformal_quantile(scores: Sequence[float], coverage: float) -> float:
    """The split conformal quantile: the ``ceil((n+1)·coverage)``-th smallest score (inf when that exceeds n)."""
    n = len(scores)
    k = math.ceil((n + 1) * coverage - 1e-9)
    return math.inf if k > n or n == 0 else sorted(scores)[k - 1]


@dataclass(frozen=True)
class SetReport:
    """Sets judged on labelled answers: coverage, mean size, the share decided alone and its error."""

    n: int
    coverage: float
    mean_size: float
    #: The share of answers whose set holds exactly one option.
    decided: float
    #: Among those: the share whose one option is wrong.
    error_decided: float


class DecisionSets:
    """Split conformal prediction sets for one question: ``of(answer)``, ``abstains(answer)``, ``coverage``."""

    def __init__(self, thresholds: Mapping[str, float], *, coverage: float, n: int,
                 class_conditional: bool = False, options: Sequence[str] = (), score: str = "lac") -> None:
        if score != "lac":
            raise ValueError(f"score: only 'lac' is supported, got {score!r}")
        self.thresholds = dict(thresholds)
        self.coverage = coverage
        self.n = n
        self.class_conditional = class_conditional
        self.options = list(options)
        self.score = score

    @classmethod
    def fit(cls, answers: Sequence[Answer | Probabilities], truths: Sequence[Truth], coverage: float = 0.9,
            class_conditional: bool = False) -> DecisionSets:
        """Fit on labelled answers of one question (held out from any other fit on them)."""
        if not 0.0 < coverage < 1.0:
            raise ValueError(f"coverage: must be strictly between 0 and 1, got {coverage!r}")
        if len(answers) != len(truths):
            raise ValueError(f"answers and truths differ in length ({len(answers)} != {len(truths)})")
        if len(answers) < MIN_ANSWERS:
            raise ValueError(f"decision sets need at least {MIN_ANSWERS} labelled answers, got {len(answers)}")
        dists = [distribution(a) for a in answers]
        keys = [truth_key(t) for t in truths]
        options = list(dict.fromkeys(k for d in dists for k in d))
        for i, (d, k) in enumerate(zip(dists, keys)):
            if k not in d:
                raise ValueError(f"truth {k!r} of answer {i} is not one of its options {list(d)}")
        scores = [1.0 - d[k] for d, k in zip(dists, keys)]
        if not class_conditional:
            return cls({"*": _threshold(scores, coverage)}, coverage=coverage, n=len(scores), options=options)
        per = {o: _threshold([s for s, k in zip(scores, keys) if k == o], coverage) for o in options}
        return cls(per, coverage=coverage, n=len(scores), class_conditional=True, options=options)

    def threshold(self, option: str) -> float:
        """The probability ``option`` needs to enter a set."""
        return self.thresholds.get(option, self.thresholds.get("*", 0.0))

    def of(self, answer: Answer | Probabilities) -> list[str]:
        """The options in the answer's set, most probable first (none, one or several)."""
        d = distribution(answer)
        ranked = sorted(d, key=lambda k: -d[k])
        return [k for k in ranked if d[k] >= self.threshold(k) - 1e-12]

    def abstains(self, answer: Answer | Probabilities) -> bool:
        """True when the set is not a single option: the model should not decide alone."""
        return len(self.of(answer)) != 1

    def evaluate(self, answers: Sequence[Answer | Probabilities], truths: Sequence[Truth]) -> SetReport:
        """Coverage, mean set size and the share decided alone (with its error) on labelled answers."""
        sets = [self.of(a) for a in answers]
        keys = [truth_key(t) for t in truths]
        n = len(sets)
        alone = [(s, k) for s, k in zip(sets, keys) if len(s) == 1]
        return SetReport(n=n, coverage=sum(k in s for s, k in zip(sets, keys)) / max(n, 1),
                         mean_size=sum(len(s) for s in sets) / max(n, 1), decided=len(alone) / max(n, 1),
                         error_decided=sum(s[0] != k for s, k in alone) / max(len(alone), 1))

    def attach(self, answer: Answer) -> Answer:
        """A copy of the answer with its ``decision_set`` filled in (``answer.abstains`` then reads it)."""
        return answer.model_copy(update={"decision_set": self.of(answer)})

    # -- persistence ----------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "score": self.score, "coverage": self.coverage, "n": self.n,
                "class_conditional": self.class_conditional, "options": self.options,
                "thresholds": self.thresholds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecisionSets:
        if d.get("format") != FORMAT:
            raise ValueError(f"not decision sets (format {d.get('format')!r}, expected {FORMAT!r})")
        return cls({str(k): float(v) for k, v in d["thresholds"].items()}, coverage=float(d["coverage"]),
                   n=int(d["n"]), class_conditional=bool(d.get("class_conditional")),
                   options=[str(o) for o in d.get("options", [])], score=str(d.get("score", "lac")))

    def save(self, path: str | Path) -> None:
        """Into the calibration file at ``path`` (its ``decision_sets`` key; other keys kept), or a new file."""
        _write(path, self.to_dict())

    @staticmethod
    def save_many(sets: Mapping[str, DecisionSets], path: str | Path) -> None:
        """One DecisionSets per question id into the calibration file at ``path`` (or a new file)."""
        _write(path, {q: s.to_dict() for q, s in sets.items()})

    @classmethod
    def load(cls, path: str | Path, question_id: str | None = None) -> DecisionSets:
        """From a calibration file's ``decision_sets`` key (or a file holding the sets alone); where it holds
        one per question id, ``question_id`` picks one (needed when there are several)."""
        every = cls.load_all(path)
        if question_id is not None:
            if question_id not in every:
                raise ValueError(f"{path}: no decision sets for question {question_id!r} (it has {sorted(every)})")
            return every[question_id]
        if len(every) != 1:
            raise ValueError(f"{path}: decision sets for {sorted(every)}; pass question_id=, or load_all()")
        return next(iter(every.values()))

    @classmethod
    def load_all(cls, path: str | Path) -> dict[str, DecisionSets]:
        """Every decision set in the file, by question id ("*" for sets saved alone): a client's ``sets=``."""
        data = json.loads(read_text(path))
        entry = data.get(KEY, data) if isinstance(data, dict) else None
        if not isinstance(entry, dict):
            raise ValueError(f"{path}: no decision sets in it")
        if "format" in entry:
            return {"*": cls.from_dict(entry)}
        if not entry or not all(isinstance(v, dict) for v in entry.values()):
            raise ValueError(f"{path}: no decision sets in it")
        return {str(q): cls.from_dict(v) for q, v in entry.items()}

    def __repr__(self) -> str:
        kind = "class-conditional" if self.class_conditional else "marginal"
        return f"DecisionSets(coverage={self.coverage}, n={self.n}, {kind}, thresholds={self.thresholds})"


def _write(path: str | Path, entry: dict[str, Any]) -> None:
    p = Path(path)
    data = json.loads(read_text(p)) if p.is_file() else {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: not a JSON object, so not a calibration file")
    data[KEY] = entry
    p.write_text(json.dumps(data, indent=2) + "\n")


def _threshold(scores: Sequence[float], coverage: float) -> float:
    """The probability an option needs: ``1 - q`` (0 when there are too few scores for ``coverage``)."""
    return max(0.0, 1.0 - conformal_quantile(scores, coverage))


def attach_sets(answers: Mapping[str, Answer], sets: DecisionSets | Mapping[str, DecisionSets]) -> dict[str, Answer]:
    """Each answer with its set: ``sets`` for every question, or one per question id ("*": any other;
    answers of a question without sets are left as they are)."""
    if isinstance(sets, DecisionSets):
        return {q: sets.attach(a) for q, a in answers.items()}
    out: dict[str, Answer] = {}
    for q, a in answers.items():
        one = sets.get(q, sets.get("*"))
        out[q] = a if one is None else one.attach(a)
    return out


__all__ = ["DecisionSets", "SetReport", "conformal_quantile", "distribution", "truth_key", "attach_sets"]
