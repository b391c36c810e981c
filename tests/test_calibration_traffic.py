"""Calibration from a question's own traffic: the lean over unlabelled answers divided out, in the same file."""

from __future__ import annotations

import math
import random

import pytest

from jev_shared import NoulAnswer
from jev_shared.calibration import Calibrator, Record, fit_traffic, lean, metrics, states_short, traffic_offsets


def leaning_nouls(n: int, *, push: float, seed: int = 0, qid: str = "spam") -> list[Record]:
    """Yes/no answers whose truth is P(true) = sigmoid(z) but which the model reports as sigmoid(z + push):
    every state read ``push`` logits towards "true" whatever it says."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        z = rng.gauss(0.0, 2.5)
        reported = 1 / (1 + math.exp(-(z + push)))
        label = "true" if rng.random() < 1 / (1 + math.exp(-z)) else "false"
        out.append(Record({"true": reported, "false": 1 - reported}, label, qid))
    return out


def test_offsets_divide_the_mean_answer_out():
    dists = [{"a": 0.7, "b": 0.2, "c": 0.1}, {"a": 0.5, "b": 0.4, "c": 0.1}]
    offsets = traffic_offsets(dists)
    assert lean(dists) == pytest.approx({"a": 0.6, "b": 0.3, "c": 0.1})
    assert sum(offsets.values()) == pytest.approx(0.0)
    # the mean itself, divided, is uniform
    cal = Calibrator(biases={"q": offsets})
    assert list(cal._temper(lean(dists), "q").values()) == pytest.approx([1 / 3] * 3)


def test_a_leaning_question_answers_right_more_often_after_its_traffic_with_no_label():
    records = leaning_nouls(400, push=2.0)
    cal = fit_traffic({"spam": [r.probabilities for r in records]})
    before, after = metrics(records), metrics(cal.calibrate(records))
    assert after.accuracy > before.accuracy + 0.08
    assert after.ece < before.ece
    # applied to an answer the way the client applies a loaded file: by its question id
    assert cal.apply(NoulAnswer(noul=0.8), cal.key_for("spam", "noul")).noul < 0.6


def test_labels_add_a_temperature_fitted_after_the_offsets_and_both_survive_the_file(tmp_path):
    records = leaning_nouls(300, push=1.5, seed=1)
    sharp = [Record({k: v for k, v in zip(r.probabilities, _sharpen(list(r.probabilities.values())))},
                    r.label, r.question_id) for r in records]
    cal = fit_traffic({"spam": [r.probabilities for r in sharp]}, labelled=sharp[:100])
    assert cal.temperature("spam") > 1.5  # the over-sharp answers are softened
    path = tmp_path / "cal.json"
    cal.save(path)
    loaded = Calibrator.load(path)
    assert loaded.calibrate(sharp[100:])[0].probabilities == pytest.approx(cal.calibrate(sharp[100:])[0].probabilities)
    assert metrics(loaded.calibrate(sharp[100:])).ece < metrics(sharp[100:]).ece


def _sharpen(probs: list[float]) -> list[float]:
    w = [p ** 3 for p in probs]
    return [x / sum(w) for x in w]


def test_too_few_states_give_no_offsets_and_say_how_many_more():
    answers = {"spam": [{"true": 0.9, "false": 0.1}] * 5}
    assert fit_traffic(answers).biases == {}
    assert states_short(answers) == {"spam": 15}


def test_answers_of_another_question_shape_are_refused_by_position():
    with pytest.raises(ValueError, match="answer 2 has the options"):
        lean([{"a": 0.5, "b": 0.5}, {"a": 0.5, "c": 0.5}])
