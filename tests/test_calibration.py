"""Calibration: temperature scaling fitted on labelled answers, its metrics, and its JSON file."""

from __future__ import annotations

import math
import random

import pytest

from jev_shared import ChoiceAnswer, NoulAnswer, ScoreAnswer, SystemOneResponse
from jev_shared.calibration import (
    Calibrator,
    Record,
    fit_temperature,
    fit_temperature_bias,
    metrics,
    recommend_threshold,
    records_from,
    rescale_top,
    temper,
    top_probability,
    wilson_lower,
)

KEYS = ["billing", "technical", "account", "shipping"]


def synthetic(n: int, *, true_temp: float, seed: int = 0, qid: str = "team") -> list[Record]:
    """Records whose labels are drawn from softmax(z / true_temp) but reported as softmax(z).

    With true_temp > 1 the reported probabilities are over-confident, so the best fit is T ≈ true_temp.
    """
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        logits = [rng.gauss(0.0, 3.0) for _ in KEYS]
        reported = temper([math.exp(z) for z in logits], 1.0)
        truth = temper(reported, true_temp)
        label = rng.choices(KEYS, weights=truth)[0]
        out.append(Record(dict(zip(KEYS, reported)), label, qid))
    return out


def test_temper_is_a_softmax_of_scaled_logprobs():
    probs = [0.884873983, 0.084389690, 0.030736327]
    assert temper(probs, 1.0) == pytest.approx(probs)
    soft = temper(probs, 2.0)
    expected = [math.sqrt(p) for p in probs]
    assert soft == pytest.approx([e / sum(expected) for e in expected])
    assert max(temper(probs, 0.5)) > max(probs) > max(soft)
    assert temper([1.0, 0.0], 2.0)[1] > 0  # a label left at 0 gets mass back under T > 1


def test_overconfident_data_gets_t_above_one_and_a_lower_ece():
    records = synthetic(600, true_temp=2.5)
    cal = Calibrator.fit(records)
    assert 1.8 < cal.temperature("team") < 3.3
    held_out = synthetic(600, true_temp=2.5, seed=1)
    report = cal.evaluate(held_out)
    assert report.overall.after.ece < report.overall.before.ece - 0.05
    assert report.overall.after.nll < report.overall.before.nll
    assert report.overall.after.brier < report.overall.before.brier
    assert report.overall.after.accuracy == report.overall.before.accuracy  # the argmax never moves


def test_underconfident_data_gets_t_below_one():
    assert fit_temperature(synthetic(600, true_temp=0.5)) < 0.7


def test_calibrated_data_keeps_t_near_one():
    assert 0.8 < fit_temperature(synthetic(800, true_temp=1.0, seed=3)) < 1.25


def test_metrics_by_hand():
    records = [
        Record({"a": 0.9, "b": 0.1}, "a"),
        Record({"a": 0.8, "b": 0.2}, "b"),
        Record({"a": 0.4, "b": 0.6}, "b"),
        Record({"a": 0.5, "b": 0.5}, "a"),  # a tie goes to the first key
    ]
    m = metrics(records, thresholds=(0.0, 0.7))
    assert m.accuracy == 0.75
    # bins: 0.9 (right), 0.8 (wrong), 0.6 (right), 0.5 (right): |1-.9|+|0-.8|+|1-.6|+|1-.5| over 4
    assert m.ece == pytest.approx((0.1 + 0.8 + 0.4 + 0.5) / 4)
    assert m.brier == pytest.approx((0.02 + 1.28 + 0.32 + 0.5) / 4)
    assert m.nll == pytest.approx(-(math.log(0.9) + math.log(0.2) + math.log(0.6) + math.log(0.5)) / 4)
    assert [(s.threshold, s.coverage, s.accuracy) for s in m.selective] == [(0.0, 1.0, 0.75), (0.7, 0.5, 0.5)]


def test_per_question_temperatures_and_global_fallback():
    records = synthetic(400, true_temp=3.0, qid="hot") + synthetic(400, true_temp=0.6, seed=2, qid="cold")
    records += synthetic(5, true_temp=1.0, seed=4, qid="rare")
    cal = Calibrator.fit(records, min_records=20)
    assert cal.temperature("hot") > 2.0 > 1.0 > cal.temperature("cold")
    assert "rare" not in cal.temperatures
    assert cal.temperature("rare") == cal.temperature()  # too few records: the global T
    assert set(cal.report().per_question) == {"hot", "cold", "rare"}


def test_recommended_threshold_reaches_the_target():
    records = synthetic(800, true_temp=1.0, seed=5)
    cal = Calibrator.fit(records, target=0.9)
    t = cal.threshold("team")
    assert t is not None
    row = next(s for s in cal.report().per_question["team"].after.selective if s.threshold == t)
    assert wilson_lower(row.accuracy, row.n) >= 0.9  # with a standard error to spare
    lower = [s for s in cal.report().per_question["team"].after.selective if s.threshold < t and s.n >= 5]
    assert all(wilson_lower(s.accuracy, s.n) < 0.9 for s in lower)  # the lowest such threshold


def test_a_threshold_that_only_just_reaches_the_target_in_sample_is_not_recommended():
    # 19 of 20 right above 0.9: 95% measured, but 20 answers cannot tell 95% from 88%
    records = [Record({"a": 0.95, "b": 0.05}, "a", "q")] * 19 + [Record({"a": 0.95, "b": 0.05}, "b", "q")]
    m = metrics(records, thresholds=(0.9,))
    assert m.selective[0].accuracy == 0.95
    assert recommend_threshold(m, 0.95) is None
    assert recommend_threshold(m, 0.95, z=0.0) == 0.9
    assert wilson_lower(0.95, 20) == pytest.approx(0.876, abs=1e-3)
    assert recommend_threshold(metrics(records * 10, thresholds=(0.9,)), 0.9) == 0.9  # 200 answers: it holds


def test_unreachable_target_recommends_no_gate():
    records = [Record({"a": 0.5, "b": 0.5}, "b", "q")] * 30
    cal = Calibrator.fit(records, target=0.99)
    assert cal.threshold("q") is None
    assert cal.gate(NoulAnswer(noul=0.99), "q") is False


def test_apply_recomputes_every_answer_field():
    cal = Calibrator({"*": 1.0, "team": 2.0, "urgency": 2.0, "ok": 2.0})
    choice = ChoiceAnswer(choice="billing", probabilities={"billing": 0.81, "technical": 0.09, "sales": 0.1},
                          confidence=0.715)
    score = ScoreAnswer(score=1.8, legend={"0": "low", "1": "mid", "2": "high"},
                        probabilities={"0": 0.0, "1": 0.2, "2": 0.8}, confidence=0.7)
    resp = SystemOneResponse(model="m", answers={"team": choice, "urgency": score, "ok": NoulAnswer(noul=0.9)})
    out = cal.apply(resp)
    c = out.answers["team"]
    assert c.probabilities["billing"] == pytest.approx(0.9 / (0.9 + 0.3 + math.sqrt(0.1)))
    assert c.choice == "billing"
    assert c.confidence == pytest.approx((3 * c.probabilities["billing"] - 1) / 2)
    s = out.answers["urgency"]
    assert s.score == pytest.approx(sum(int(k) * p for k, p in s.probabilities.items()))
    assert s.probabilities["0"] > 0 and s.legend == score.legend
    assert out.answers["ok"].noul == pytest.approx(3 / (3 + 1))  # sqrt(.9)/(sqrt(.9)+sqrt(.1))
    assert resp.answers["ok"].noul == 0.9  # the original is untouched
    assert cal.apply(NoulAnswer(noul=0.9)).noul == pytest.approx(0.9)  # no question id: the global T of 1
    assert top_probability(out.answers["ok"]) == pytest.approx(0.75)


def test_records_from_answers_and_labels():
    resp = SystemOneResponse(model="m", answers={
        "ok": NoulAnswer(noul=0.7),
        "level": ScoreAnswer(score=1.0, legend={"0": "a", "1": "b"}, probabilities={"0": 0.0, "1": 1.0}, confidence=1.0),
    })
    recs = records_from(resp, {"ok": "no", "level": 1})
    assert recs[0] == Record({"true": 0.7, "false": pytest.approx(0.3)}, "false", "ok")
    assert recs[1].label == "1"
    assert Record.from_answer(NoulAnswer(noul=0.2), True).label == "true"
    with pytest.raises(ValueError):
        Record.from_answer(resp.answers["level"], 5)


def test_save_and_load_round_trip(tmp_path):
    records = synthetic(300, true_temp=2.0, seed=6) + synthetic(300, true_temp=0.7, seed=7, qid="other")
    cal = Calibrator.fit(records, target=0.8)
    path = tmp_path / "cal.json"
    cal.save(path)
    again = Calibrator.load(path)
    assert again.temperatures == cal.temperatures
    assert again.thresholds == cal.thresholds
    assert again.target == 0.8
    assert again.report() == cal.report()
    answer = NoulAnswer(noul=0.93)
    assert again.apply(answer, "team") == cal.apply(answer, "team")
    assert again.report().markdown() == cal.report().markdown()
    with pytest.raises(ValueError, match="not a calibration file"):
        Calibrator.from_dict({"temperatures": {}})


def leaning(n: int, *, lean: float, seed: int, qid: str = "team") -> list[Record]:
    """Records whose reported probabilities lean towards the first option by ``lean`` nats."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        logits = [rng.gauss(0.0, 2.0) for _ in KEYS]
        label = rng.choices(KEYS, weights=temper([math.exp(z) for z in logits], 1.0))[0]
        reported = temper([math.exp(z + (lean if i == 0 else 0.0)) for i, z in enumerate(logits)], 1.0)
        out.append(Record(dict(zip(KEYS, reported)), label, qid))
    return out


def test_offsets_undo_a_lean_to_one_option_and_raise_accuracy():
    temp, offsets = fit_temperature_bias(leaning(600, lean=3.0, seed=8))
    assert 0.8 < temp < 1.25
    assert offsets["billing"] == 0.0
    assert all(2.0 < offsets[k] < 4.0 for k in KEYS[1:])  # the others are lifted by about the lean
    cal = Calibrator.fit(leaning(600, lean=3.0, seed=8), bias=True)
    report = cal.evaluate(leaning(600, lean=3.0, seed=9))
    assert report.overall.after.accuracy > report.overall.before.accuracy + 0.1
    assert report.overall.after.ece < report.overall.before.ece
    plain = Calibrator.fit(leaning(600, lean=3.0, seed=8)).evaluate(leaning(600, lean=3.0, seed=9))
    assert plain.overall.after.accuracy == plain.overall.before.accuracy  # a temperature alone cannot help
    answer = ChoiceAnswer(choice="billing", probabilities={"billing": 0.6, "technical": 0.3, "account": 0.05,
                                                           "shipping": 0.05}, confidence=0.47)
    assert cal.apply(answer, "team").choice == "technical"  # the offsets may change the answer


def test_offsets_on_yes_no_are_platt_scaling():
    # a model that says "no" too readily: P(true) is 0.3 for true statements and 0.1 for false ones
    records = [Record({"true": 0.3, "false": 0.7}, "true", "ok")] * 40 + [Record({"true": 0.1, "false": 0.9}, "false", "ok")] * 40
    cal = Calibrator.fit(records, bias=True)
    assert cal.evaluate(records).overall.after.accuracy == 1.0
    assert cal.apply(NoulAnswer(noul=0.3), "ok").noul > 0.5 > cal.apply(NoulAnswer(noul=0.1), "ok").noul
    again = Calibrator.from_dict(cal.to_dict())
    assert again.biases == cal.biases
    assert again.apply(NoulAnswer(noul=0.3), "ok") == cal.apply(NoulAnswer(noul=0.3), "ok")


def test_offsets_need_one_question():
    with pytest.raises(ValueError, match="one question"):
        fit_temperature_bias([Record({"a": 0.5, "b": 0.5}, "a"), Record({"x": 0.5, "y": 0.5}, "x")])


def test_fit_needs_records():
    with pytest.raises(ValueError):
        Calibrator.fit([])


# -- top-label scaling: a reliability curve with a shape one temperature cannot fit -------------------

def bent(n: int, seed: int = 3) -> list[Record]:
    """A timid model that is nearly always right at 0.6-0.8 and mostly wrong at 0.4 (the embedded
    model's routing curve, docs/quality.md): the top probability's meaning is bent, not scaled."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        p = rng.choice([0.4, 0.5, 0.6, 0.7, 0.8])
        right = rng.random() < {0.4: 0.2, 0.5: 0.5, 0.6: 0.85, 0.7: 0.97, 0.8: 0.99}[p]
        probs = {"a": p, "b": (1 - p) * 0.6, "c": (1 - p) * 0.4}
        out.append(Record(probs, "a" if right else rng.choice(["b", "c"]), "team"))
    return out


def test_rescale_top_keeps_the_answer_and_the_others_ratios():
    probs = [0.5, 0.3, 0.2]
    out = rescale_top(probs, 3.0, 0.5)
    assert sum(out) == pytest.approx(1.0)
    assert out[0] > 0.5 and out[1] / out[2] == pytest.approx(1.5)
    low = rescale_top(probs, 1.0, -5.0)  # pushed down as far as it goes: level with the runner-up, never under
    assert low[0] == pytest.approx(low[1]) and low[0] > low[1]
    assert rescale_top([1.0, 0.0], 3.0, 0.5) == [1.0, 0.0]


def test_top_label_scaling_fits_a_bent_curve_that_a_temperature_cannot():
    fit, judge = bent(600, seed=3), bent(600, seed=4)
    t_only = Calibrator.fit(fit, min_records=20)
    with_top = Calibrator.fit(fit, min_records=20, top=True)
    slope, _ = with_top.tops["team"]
    assert slope > 2.0  # steeper than the identity: timid high, bold low
    ece_t = metrics(t_only.calibrate(judge)).ece
    ece_top = metrics(with_top.calibrate(judge)).ece
    assert ece_top < 0.6 * ece_t  # 0.054 against 0.101 (0.172 as answered)
    assert metrics(with_top.calibrate(judge)).accuracy == metrics(judge).accuracy  # no answer changed
    again = Calibrator.from_dict(with_top.to_dict())
    assert again.tops == with_top.tops
    assert again.calibrate(judge[:5])[0].probabilities == with_top.calibrate(judge[:5])[0].probabilities
