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

The quantile is conservative: its sets cover with probability ``ceil((n+1)·coverage)/(n+1)``, up to
``1/(n+1)`` above the target (0.95 asked of 10 answers: every option, coverage 1). ``randomized=True``
draws the boundary between that order statistic and the one below it, so coverage averages the target
exactly (Vovk's smoothed conformal, drawn once per fit: the sets stay a fixed function of the answer).
"""

from __future__ import annotations

import json
import math
import random
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


def conformal_quantile(scores: Sequence[float], coverage: float, u: float | None = None) -> float:
    """The split conformal quantile: the ``k = ceil((n+1)·coverage)``-th smallest score (inf when ``k > n``).

    Its set covers with probability ``k/(n+1)``: at least ``coverage``, and up to ``1/(n+1)`` more. With
    ``u`` (a uniform draw in [0, 1), independent of the scores) the boundary is randomized: the ``k``-th
    smallest with probability ``(n+1)·coverage - (k-1)``, else the ``(k-1)``-th (-inf when that is the 0th:
    an empty set), so the coverage, averaged over ``u`` and the labelled draw, is ``coverage`` exactly
    (for scores without ties; ties at the boundary still count in the set, so it stays at least ``coverage``).
    """
    n = len(scores)
    target = (n + 1) * coverage
    k = math.ceil(target - 1e-9)
    if u is not None and u >= target - (k - 1):
        k -= 1
    if k > n or n == 0:
        return math.inf
    return -math.inf if k < 1 else sorted(scores)[k - 1]


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
                 class_conditional: bool = False, options: Sequence[str] = (), score: str = "lac",
                 randomized: bool = False, seed: int | str | None = None) -> None:
        if score != "lac":
            raise ValueError(f"score: only 'lac' is supported, got {score!r}")
        self.thresholds = dict(thresholds)
        self.coverage = coverage
        self.n = n
        self.class_conditional = class_conditional
        self.options = list(options)
        self.score = score
        #: The boundary was drawn at random (``fit(randomized=True)``): coverage ``coverage`` on average, exactly.
        self.randomized = randomized
        #: The randomized boundary's seed, where the fit was given one (None: not randomized, or not repeatable).
        self.seed = seed if randomized else None

    @classmethod
    def fit(cls, answers: Sequence[Answer | Probabilities], truths: Sequence[Truth], coverage: float = 0.9,
            class_conditional: bool = False, randomized: bool = False,
            seed: int | str | None = None) -> DecisionSets:
        """Fit on labelled answers of one question (held out from any other fit on them).

        ``randomized=True`` draws the boundary (:func:`conformal_quantile`'s ``u``, one draw per threshold)
        so that coverage averages ``coverage`` exactly instead of up to ``1/(n+1)`` above it; the sets stay
        a fixed function of the answer once fitted. ``seed`` makes the draw repeatable (for benches and
        tests: the guarantee needs the draw independent of the answers, so never derive it from them).
        """
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
        rng = random.Random(seed) if randomized else None
        if not class_conditional:
            return cls({"*": _threshold(scores, coverage, rng)}, coverage=coverage, n=len(scores), options=options,
                       randomized=randomized, seed=seed)
        per = {o: _threshold([s for s, k in zip(scores, keys) if k == o], coverage, rng) for o in options}
        return cls(per, coverage=coverage, n=len(scores), class_conditional=True, options=options,
                   randomized=randomized, seed=seed)

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
        seed = {"seed": self.seed} if self.seed is not None else {}  # which draw: a randomized fit given a seed
        options = {"options": self.options} if self.options else {}  # none: sets for any answer
        return {"format": FORMAT, "score": self.score, "coverage": self.coverage, "n": self.n,
                "class_conditional": self.class_conditional, **options,
                "thresholds": self.thresholds, "randomized": self.randomized, **seed}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DecisionSets:
        """Sets as :meth:`to_dict` wrote them; anything else (a threshold outside 0..1, a coverage outside
        (0, 1), a missing field) is a ValueError saying what."""
        if not isinstance(d, Mapping) or d.get("format") != FORMAT:
            got = d.get("format") if isinstance(d, Mapping) else type(d).__name__
            raise ValueError(f"not decision sets (format {got!r}, expected {FORMAT!r})")
        try:
            thresholds = {str(k): _number(v, "a threshold", 0.0, 1.0) for k, v in d["thresholds"].items()}
            sets = cls(thresholds, coverage=_number(d["coverage"], "coverage", 0.0, 1.0, open_=True),
                       n=int(d["n"]), class_conditional=bool(d.get("class_conditional")),
                       options=_options(d.get("options")), score=str(d.get("score", "lac")),
                       randomized=bool(d.get("randomized")), seed=_seed(d.get("seed")))
        except KeyError as exc:
            raise ValueError(f"decision sets without {exc.args[0]!r}") from None
        except (TypeError, AttributeError) as exc:
            raise ValueError(f"decision sets malformed ({exc})") from None
        if not sets.thresholds:
            raise ValueError("decision sets without a threshold")
        return sets

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
        try:
            return cls.all_from_dict(json.loads(read_text(path)))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None

    @classmethod
    def all_from_dict(cls, data: Any) -> dict[str, DecisionSets]:
        """:meth:`load_all` of a calibration file already parsed (a ValueError when it holds no sets)."""
        entry = data.get(KEY, data) if isinstance(data, dict) else None
        if not isinstance(entry, dict):
            raise ValueError("no decision sets in it")
        if "format" in entry:
            return {"*": cls.from_dict(entry)}
        if not entry or not all(isinstance(v, dict) for v in entry.values()):
            raise ValueError("no decision sets in it")
        return {str(q): cls.from_dict(v) for q, v in entry.items()}

    def applies_to(self, answer: Answer | Probabilities) -> bool:
        """True when the answer has the options these sets were fitted on (any answer, for sets saved
        without their options): a set fitted on another question's options means nothing here."""
        return not self.options or set(distribution(answer)) == set(self.options)

    def __repr__(self) -> str:
        drawn = "" if not self.randomized else ", randomized" + ("" if self.seed is None else f" (seed {self.seed})")
        kind = ("class-conditional" if self.class_conditional else "marginal") + drawn
        return f"DecisionSets(coverage={self.coverage}, n={self.n}, {kind}, thresholds={self.thresholds})"


def _write(path: str | Path, entry: dict[str, Any]) -> None:
    p = Path(path)
    data = json.loads(read_text(p)) if p.is_file() else {}
    if not isinstance(data, dict):
        raise ValueError(f"{p}: not a JSON object, so not a calibration file")
    data[KEY] = entry
    p.write_text(json.dumps(data, indent=2) + "\n")


def _number(value: Any, what: str, low: float, high: float, open_: bool = False) -> float:
    """``value`` as a finite float in ``[low, high]`` (``(low, high)`` when ``open_``), else a ValueError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, got {value!r}")
    x = float(value)
    inside = low < x < high if open_ else low <= x <= high
    if not math.isfinite(x) or not inside:
        raise ValueError(f"{what} must be {'strictly ' if open_ else ''}between {low:g} and {high:g}, got {value!r}")
    return x


def _options(value: Any) -> list[str]:
    """Saved options: absent (sets for any answer), else a list of two or more distinct texts. A text (read as
    its letters), ``[]`` or a list of one is a ValueError: sets that would never apply, or apply where not meant
    (sets for any answer leave the key out, as :meth:`to_dict` does)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) < 2 or not all(isinstance(o, str) for o in value):
        raise ValueError(f"options must be a list of two or more option keys (texts), got {value!r}")
    if len(set(value)) != len(value):
        raise ValueError(f"options must be distinct, got {value!r}")
    return list(value)


def _seed(value: Any) -> int | str | None:
    """A saved seed: an integer or a text (or none), else a ValueError."""
    if value is None or (isinstance(value, (int, str)) and not isinstance(value, bool)):
        return value
    raise ValueError(f"a seed must be an integer or a text, got {value!r}")


def _threshold(scores: Sequence[float], coverage: float, rng: random.Random | None = None) -> float:
    """The probability an option needs: ``1 - q`` (0 when there are too few scores for ``coverage``; 1 for
    a randomized boundary drawn below the smallest score)."""
    return min(1.0, max(0.0, 1.0 - conformal_quantile(scores, coverage, None if rng is None else rng.random())))


def sets_for(sets: DecisionSets | Mapping[str, DecisionSets], question_id: str) -> DecisionSets | None:
    """The sets a question gets: ``sets`` itself (for every question), else its id's, else ``"*"``'s, else None."""
    return sets if isinstance(sets, DecisionSets) else sets.get(question_id, sets.get("*"))


def attach_sets(answers: Mapping[str, Answer], sets: DecisionSets | Mapping[str, DecisionSets]) -> dict[str, Answer]:
    """Each answer with its set: ``sets`` for every question, or one per question id ("*": any other).
    Answers of a question without sets, or whose options are not the ones its sets were fitted on
    (:meth:`DecisionSets.applies_to`), are left as they are: no set rather than a meaningless one."""
    out: dict[str, Answer] = {}
    for q, a in answers.items():
        one = sets_for(sets, q)
        out[q] = one.attach(a) if one is not None and one.applies_to(a) else a
    return out


__all__ = ["DecisionSets", "SetReport", "conformal_quantile", "distribution", "truth_key", "attach_sets", "sets_for"]
