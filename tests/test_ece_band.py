"""``ece_band``: what a perfectly calibrated model stating the same probabilities reads as its ECE on as many
answers, the figure an ECE is judged beside (on a few dozen answers an ECE is mostly noise)."""

from __future__ import annotations

from jev_shared.calibration import Record, ece_band, metrics


def _stated(p: float, n: int, right: int) -> list[Record]:
    return [Record({"a": p, "b": 1 - p}, "a" if i < right else "b") for i in range(n)]


def test_the_band_narrows_with_more_answers_and_is_repeatable():
    small, large = ece_band(_stated(0.7, 30, 21)), ece_band(_stated(0.7, 600, 420))
    assert 0.05 < small < 0.2 and large < small / 2
    assert ece_band(_stated(0.7, 30, 21)) == small  # one seed: the same figure every time


def test_an_honest_set_reads_inside_and_a_confident_wrong_one_outside():
    honest = _stated(0.7, 200, 140)  # right 70% of the time at a stated 0.7
    assert metrics(honest).ece <= ece_band(honest)
    sure_and_wrong = _stated(0.95, 200, 120)  # right 60% of the time at a stated 0.95
    assert metrics(sure_and_wrong).ece > ece_band(sure_and_wrong, quantile=0.99)
