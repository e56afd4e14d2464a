"""Confident learning: the confident joint, its calibrated joint and the suspects, on cases small enough to count."""

import numpy as np
import pytest

from senti.core.confident_learning import both_flag, estimate_noise, find_suspects
from senti.core.errors import SentiError


def test_confident_joint_counts_rows_above_their_thresholds_by_hand():
    probabilities = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7],  # given 0: thresholds (0.9+0.8+0.3)/3 = 0.667
                              [0.2, 0.8], [0.1, 0.9], [0.6, 0.4]])  # given 1: (0.8+0.9+0.4)/3 = 0.7
    given = np.array([0, 0, 0, 1, 1, 1])
    estimate = estimate_noise(probabilities, given)
    assert estimate.thresholds == pytest.approx([2 / 3, 0.7])
    # row 3 (p1 0.7 >= 0.7) counts as 1; row 6 (p0 0.6 < 0.667, p1 0.4 < 0.7) is above no threshold
    assert estimate.confident_joint.tolist() == [[2, 1], [0, 2]]
    # rows calibrated to the given counts (3 and 3): [[2, 1], [0, 3]] / 6
    assert estimate.joint == pytest.approx(np.array([[2, 1], [0, 3]]) / 6)
    assert estimate.noise_per_class == pytest.approx([1 / 3, 0.0])
    assert estimate.noise_count == 1
    suspects = find_suspects(probabilities, given, estimate)
    assert [(s.index, s.given, s.suggested) for s in suspects] == [(2, 0, 1)]
    assert suspects[0].margin == pytest.approx(0.4)


def test_flipped_labels_are_found_when_the_probabilities_know_the_truth():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 600)
    probabilities = np.full((600, 3), 0.1)
    probabilities[np.arange(600), truth] = 0.8
    probabilities += rng.uniform(0, 0.05, probabilities.shape)
    probabilities /= probabilities.sum(1, keepdims=True)
    given = truth.copy()
    flipped = rng.choice(600, 60, replace=False)
    given[flipped] = (truth[flipped] + rng.integers(1, 3, 60)) % 3
    suspects = find_suspects(probabilities, given)
    assert {s.index for s in suspects} == set(flipped.tolist())
    assert all(s.suggested == truth[s.index] for s in suspects)
    assert estimate_noise(probabilities, given).noise_count == 60
    margins = [s.margin for s in suspects]
    assert margins == sorted(margins, reverse=True)


def test_a_row_the_probabilities_give_its_own_label_is_never_a_suspect_and_a_class_keeps_a_row():
    probabilities = np.array([[0.45, 0.55], [0.4, 0.6], [0.1, 0.9], [0.2, 0.8]])
    given = np.array([0, 0, 1, 1])  # every row of class 0 leans to 1
    suspects = find_suspects(probabilities, given)
    assert all(probabilities[s.index].argmax() != s.given for s in suspects)
    assert sum(s.given == 0 for s in suspects) <= 1  # class 0 has 2 rows: one is kept


def test_both_keeps_only_rows_flagged_alike_with_the_smaller_margin():
    first = find_suspects(np.array([[0.1, 0.9], [0.9, 0.1], [0.2, 0.8], [0.8, 0.2]] * 5), np.array([0, 0, 1, 1] * 5))
    second = [s for s in first if s.index % 8 == 0]
    kept = both_flag(first, second)
    assert {s.index for s in kept} == {s.index for s in second}


def test_inputs_that_do_not_fit_are_refused_in_one_line():
    with pytest.raises(SentiError, match="do not match"):
        estimate_noise(np.ones((3, 2)) / 2, np.array([0, 1]))
    with pytest.raises(SentiError, match="outside"):
        estimate_noise(np.ones((2, 2)) / 2, np.array([0, 2]))
    with pytest.raises(SentiError, match="NaN"):
        estimate_noise(np.array([[np.nan, 1.0], [0.5, 0.5]]), np.array([0, 1]))
