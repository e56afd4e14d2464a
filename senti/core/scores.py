"""Scores from logits: one softmax for serving, export, selection and distillation."""

from __future__ import annotations

import numpy as np


def softmax(logits: np.ndarray) -> np.ndarray:
    """Probabilities per row, stable for large logits."""
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities per row (last axis), stable for large logits."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def mean_log_loss(logits: np.ndarray, gold: np.ndarray) -> float:
    """Mean cross-entropy of `logits` [answers, classes] against the class ids `gold` [answers]."""
    shifted = logits - logits.max(-1, keepdims=True)
    return float(np.mean(np.log(np.exp(shifted).sum(-1)) - shifted[np.arange(len(gold)), gold]))


def confusion_matrix(gold, predicted, k: int) -> np.ndarray:
    """Counts of (gold label, predicted label) over `k` labels: rows gold, columns predicted."""
    gold, predicted = np.asarray(gold, dtype=np.int64), np.asarray(predicted, dtype=np.int64)
    return np.bincount(gold * k + predicted, minlength=k * k).reshape(k, k)


def macro_f1(confusion: np.ndarray) -> float:
    """Macro-averaged F1 over the labels seen in gold or predictions, as scikit-learn's f1_score(average="macro"):
    the one rule for every report, for choosing the logit adjustment and for early figures alike."""
    hits = np.diag(confusion).astype(np.float64)
    denominator = confusion.sum(0) + confusion.sum(1)
    present = denominator > 0
    return float((2 * hits[present] / denominator[present]).mean()) if present.any() else 0.0
