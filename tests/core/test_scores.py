"""senti.core.scores: softmax and log-softmax, the confusion matrix and the one macro-F1."""

from __future__ import annotations

import numpy as np
import pytest


def test_macro_f1_is_scikit_learns():
    """One macro-F1 (core.scores) for reports and for choosing the logit adjustment: there were two, and they
    disagreed on a class with neither gold nor predicted rows (this one counted it as 0, the reports left it out)."""
    from sklearn.metrics import f1_score

    from senti.core.scores import confusion_matrix, macro_f1

    rng = np.random.default_rng(0)
    gold, predicted = rng.integers(0, 4, 300), rng.integers(0, 3, 300)  # class 3 is never predicted
    expected = f1_score(gold, predicted, average="macro", zero_division=0)  # class 4 has no row: left out
    assert macro_f1(confusion_matrix(gold, predicted, 5)) == pytest.approx(expected)


def test_softmax_and_log_softmax_are_stable_for_large_logits():
    from senti.core.scores import log_softmax, softmax

    logits = np.array([[1000.0, 1001.0], [-5.0, -5.0]])
    probs = softmax(logits)
    assert np.allclose(probs.sum(1), 1) and np.allclose(probs[1], [0.5, 0.5]) and np.isfinite(probs).all()
    assert np.allclose(np.exp(log_softmax(logits)), probs)


def test_the_confusion_matrix_rows_are_gold_and_columns_predicted():
    from senti.core.scores import confusion_matrix

    assert confusion_matrix([0, 0, 1, 2], [0, 1, 1, 1], 3).tolist() == [[1, 1, 0], [0, 1, 0], [0, 1, 0]]
