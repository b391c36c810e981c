"""Calibration from more than the top probability: feature-dependent maps, their fits, the file.

A map's numbers depend on what the engine knows at run time (options, kind, examples, the prior);
these tests pin what a map does to a known answer, that the fits recover a known dependence, that
the file format reads both versions, and that the client hands the map the answer's real context.
"""

from __future__ import annotations

import math
import random

import pytest

from jev_shared.answers import ChoiceAnswer, NoulAnswer
from jev_shared.calibration import GLOBAL, Calibrator, Context, FeatureMap, Record, metrics
from jev_shared.calibration.map import FEATURES, undivided
from jev_shared.calibration.map_fit import fit_temperature_map, fit_top_map


def _softmax(xs: list[float]) -> list[float]:
    m = max(xs)
    e = [math.exp(x - m) for x in xs]
    return [v / sum(e) for v in e]


def test_a_temperature_map_scales_the_logits_by_its_features() -> None:
    fmap = FeatureMap("temperature", {"1": 0.1, "log_k": -0.2, "examples": 0.3})
    probs = [0.7, 0.2, 0.1]
    beta = math.exp(0.1 - 0.2 * math.log(3))  # zero-shot: the examples weight is off
    assert fmap(probs, Context(kind="choice")) == pytest.approx(_softmax([beta * math.log(p) for p in probs]))
    beta = math.exp(0.1 - 0.2 * math.log(3) + 0.3)
    assert fmap(probs, Context(kind="choice", examples=3)) == pytest.approx(_softmax([beta * math.log(p) for p in probs]))
    assert fmap(probs, Context(kind="choice"))[0] == pytest.approx(0.66356, abs=1e-5)  # the number itself


def test_a_top_map_sets_the_top_probability_and_keeps_the_others_ratios() -> None:
    fmap = FeatureMap("top", {"1": 0.8, "log_k": 0.1}, {"1": 0.2, "examples": -0.5})
    probs = [0.1, 0.6, 0.3]
    z = (0.8 + 0.1 * math.log(3)) * math.log(0.6 / 0.4) + 0.2 - 0.5
    out = fmap(probs, Context(kind="choice", examples=3))
    top = 1 / (1 + math.exp(-z))
    assert out[1] == pytest.approx(top)
    assert out[0] / out[2] == pytest.approx(0.1 / 0.3)
    assert out[1] == pytest.approx(0.51722, abs=1e-5)


def test_features_read_the_prior_and_how_far_it_moved_the_answer() -> None:
    ctx = Context(kind="noul", prior=(0.8, 0.2), prior_floor=0.15)
    answer = [0.4, 0.6]  # divided by the prior: the window said 0.4·0.8 : 0.6·0.2
    assert undivided(answer, ctx) == pytest.approx([0.32 / 0.44, 0.12 / 0.44])
    assert FEATURES["prior_entropy"](answer, ctx) == pytest.approx(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2)) / math.log(2))
    raw = undivided(answer, ctx)
    assert FEATURES["shift"](answer, ctx) == pytest.approx(sum(a * math.log(a / r) for a, r in zip(answer, raw)))
    assert FEATURES["prior_entropy"](answer, Context()) == 1.0  # no prior: an even one
    assert FEATURES["noul"](answer, ctx) == 1.0 and FEATURES["score"](answer, ctx) == 0.0
    floored = Context(prior=(0.05, 0.95), prior_floor=0.15)  # the division's floor is inverted too
    assert undivided([0.5, 0.5], floored) == pytest.approx([0.15 / 1.1, 0.95 / 1.1])


@pytest.mark.parametrize("fmap", [FeatureMap("temperature", {"1": -1.5, "entropy": 2.0}),
                                  FeatureMap("top", {"1": 0.3}, {"1": -2.0, "shift": 5.0})])
def test_a_map_never_changes_the_answer(fmap: FeatureMap) -> None:
    rng = random.Random(1)
    for _ in range(200):
        k = rng.randint(2, 9)
        probs = _softmax([rng.gauss(0, 2) for _ in range(k)])
        ctx = Context(kind="choice", examples=rng.randint(0, 3), prior=tuple(_softmax([rng.gauss(0, 1) for _ in range(k)])))
        out = fmap(probs, ctx)
        assert sum(out) == pytest.approx(1.0)
        assert max(range(k), key=out.__getitem__) == max(range(k), key=probs.__getitem__)


def _drawn(rng: random.Random, n: int, k: int, beta: float, examples: int) -> list[tuple[list[float], int, Context]]:
    """Answers stated at logits z whose labels are drawn at logits beta·z: a known miscalibration."""
    out = []
    for _ in range(n):
        z = [rng.gauss(0, 1.5) for _ in range(k)]
        y = rng.choices(range(k), _softmax([beta * v for v in z]))[0]
        out.append((_softmax(z), y, Context(kind="choice", examples=examples)))
    return out


def test_the_temperature_fit_recovers_a_temperature_that_depends_on_examples() -> None:
    rng = random.Random(0)
    data = _drawn(rng, 1500, 4, 1.0, 0) + _drawn(rng, 1500, 4, 0.5, 4)  # with examples: twice too bold
    fmap = fit_temperature_map(data, ("1", "examples"), l2=0.1)
    assert fmap.slope["1"] == pytest.approx(0.0, abs=0.1)
    assert fmap.slope["examples"] == pytest.approx(math.log(0.5), abs=0.12)


def test_the_top_fit_lowers_the_ece_where_one_temperature_cannot() -> None:
    rng = random.Random(2)
    data = _drawn(rng, 1500, 4, 2.0, 0) + _drawn(rng, 1500, 4, 0.5, 4)  # timid without examples, bold with
    recs = [Record({str(i): p for i, p in enumerate(probs)}, str(y), "q", ctx) for probs, y, ctx in data]
    one_t = Calibrator.fit(recs, per_question=False).calibrate(recs)
    fmap = fit_top_map(data, ("1", "examples"), ("1", "examples"))
    mapped = Calibrator({GLOBAL: 1.0}, maps={GLOBAL: fmap}).calibrate(recs)
    for group in (slice(0, 1500), slice(1500, 3000)):
        assert metrics(mapped[group]).ece < 0.04 < metrics(one_t[group]).ece


def test_the_file_reads_both_versions_and_refuses_others(tmp_path) -> None:  # noqa: ANN001
    cal = Calibrator({GLOBAL: 1.0}, {GLOBAL: 0.9}, target=0.95,
                     maps={GLOBAL: FeatureMap("top", {"1": 0.9, "log_k": 0.05}, {"1": 0.1})})
    path = tmp_path / "cal.json"
    cal.save(path)
    assert '"jev-calibration/2"' in path.read_text()
    back = Calibrator.load(path)
    assert back.maps[GLOBAL] == cal.maps[GLOBAL]
    probs = {"a": 0.7, "b": 0.2, "c": 0.1}
    assert back._temper(probs, GLOBAL) == cal._temper(probs, GLOBAL)  # noqa: SLF001
    old = Calibrator({GLOBAL: 1.5})
    assert old.to_dict()["format"] == "jev-calibration/1" and not Calibrator.from_dict(old.to_dict()).maps
    with pytest.raises(ValueError, match="format"):
        Calibrator.from_dict({**old.to_dict(), "format": "jev-calibration/9"})
    with pytest.raises(ValueError, match="unknown features"):
        FeatureMap("top", {"1": 1.0, "moon_phase": 0.1})


def test_the_client_hands_a_map_each_answers_own_context() -> None:
    """The map sees the question's kind, its examples and the prior its answer was divided by: a map
    that moves only answers asked with examples leaves a zero-shot one alone, and one that reads the
    prior gives what the map gives on the uncalibrated answer with that prior."""
    from tests.test_examples_calibration import TEAM, WRONG, client

    by_examples = Calibrator({GLOBAL: 1.0}, maps={GLOBAL: FeatureMap("top", {"1": 1.0}, {"examples": -1.0})})
    plain = client(calibrator=None, debias=False).system_one("ticket", {"team": TEAM}).answers["team"]
    mapped = client(calibrator=by_examples, debias=False).system_one("ticket", {"team": TEAM})
    assert mapped.debug["calibration"] == {"team": "custom"}
    assert mapped.answers["team"].probabilities == pytest.approx(plain.probabilities)

    raw = client(calibrator=None).system_one("ticket", {"team": TEAM}, examples=WRONG)
    prior = tuple(raw.debug["priors"]["team"].values())
    ctx = Context(kind="choice", examples=2, prior=prior, prior_floor=0.15)  # readout.PRIOR_SHARE / 2 options
    by_prior = Calibrator({GLOBAL: 1.0}, maps={GLOBAL: FeatureMap("top", {"1": 1.0}, {"prior_entropy": -2.0,
                                                                                      "examples": 0.5})})
    got = client(calibrator=by_prior).system_one("ticket", {"team": TEAM}, examples=WRONG).answers["team"]
    want = by_prior.maps[GLOBAL](list(raw.answers["team"].probabilities.values()), ctx)
    assert list(got.probabilities.values()) == pytest.approx(want)
    assert got.probabilities != pytest.approx(raw.answers["team"].probabilities)


def test_the_shipped_map_gives_its_known_numbers() -> None:
    """The embedded model's calibration (bench/heldout_fit.py --write): a temperature that depends on the
    answer's spread. A refit moves these numbers: update them with docs/quality.md's figures."""
    from jev_shared.calibration import shipped

    cal = shipped("qwen2.5-coder-0.5b")
    assert cal is not None
    three = cal._temper({"a": 0.7, "b": 0.2, "c": 0.1}, GLOBAL, Context())  # noqa: SLF001
    assert three["a"] == pytest.approx(0.7088, abs=1e-3)  # spread 0.73: near the crossing, a little sharper
    assert cal._temper({"true": 0.55, "false": 0.45}, GLOBAL, Context(kind="noul"))["true"] == pytest.approx(  # noqa: SLF001
        0.5613, abs=1e-3)  # a timid yes/no: sharpened
    bold = cal._temper({"a": 0.97, "b": 0.02, "c": 0.01}, GLOBAL, Context())["a"]  # noqa: SLF001
    assert bold == pytest.approx(0.8998, abs=1e-3)  # a bold answer (spread 0.15): softened


def test_a_map_per_kind_is_found_by_the_engines_keys_and_round_trips() -> None:
    """A calibration file may hold a map per kind (the 1.5B's file does): the engine's
    ``key_for`` finds a kind's key by its temperature entry, with or without examples, and every other kind
    takes the global map; a file with one map (the 0.5B's) reads as before."""
    glob = FeatureMap("temperature", {"1": -0.5})
    noul = FeatureMap("temperature", {"1": 0.5})
    cal = Calibrator({GLOBAL: 1.0, "*noul": 1.0, "*noul+examples": 1.0}, {GLOBAL: 0.9},
                     maps={GLOBAL: glob, "*noul": noul, "*noul+examples": noul})
    again = Calibrator.from_dict(cal.to_dict())
    assert again.to_dict() == cal.to_dict()
    yes = NoulAnswer(noul=0.8)
    choice = ChoiceAnswer(choice="a", probabilities={"a": 0.8, "b": 0.2}, confidence=0.8)
    assert again.key_for("q", "noul", True) == "*noul+examples" and again.key_for("q", "choice") == GLOBAL
    assert again.apply(yes, again.key_for("q", "noul")).noul > 0.8  # the nouls' own: sharper
    assert again.apply(choice, again.key_for("q", "choice")).probabilities["a"] < 0.8  # the global one: softer
    from jev_shared.calibration import shipped

    small = shipped("qwen2.5-coder-0.5b")
    assert small is not None and set(small.maps) == {GLOBAL} and small.key_for("q", "noul") == GLOBAL
