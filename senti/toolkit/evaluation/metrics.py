"""Classification figures from gold and predicted label ids: one rule for every run, baseline and report."""

from __future__ import annotations

import numpy as np

from senti.core.aspects import ASPECT_POLARITIES
from senti.core.scores import confusion_matrix, macro_f1


def classification_metrics(y_true, y_pred, labels: list[str]) -> dict:
    """Accuracy, macro-F1, per-class precision, recall and F1, and the confusion matrix (rows: true label,
    columns: predicted)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    k = len(labels)
    confusion = confusion_matrix(y_true, y_pred, k)
    tp = np.diag(confusion).astype(float)
    precision = np.divide(tp, confusion.sum(0), out=np.zeros(k), where=confusion.sum(0) > 0)
    recall = np.divide(tp, confusion.sum(1), out=np.zeros(k), where=confusion.sum(1) > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(k), where=(precision + recall) > 0)
    return {
        "accuracy": float(tp.sum() / max(len(y_true), 1)),
        "macro_f1": macro_f1(confusion),
        "per_class_precision": {lab: float(v) for lab, v in zip(labels, precision)},
        "per_class_recall": {lab: float(v) for lab, v in zip(labels, recall)},
        "per_class_f1": {lab: float(v) for lab, v in zip(labels, f1)},
        "support": {lab: int(v) for lab, v in zip(labels, confusion.sum(1))},
        "confusion_matrix": confusion.tolist(),
        "labels": labels,
        "n": int(len(y_true)),
    }


def grouped(logits: np.ndarray, aspects: int) -> np.ndarray:
    """[texts, aspects x 4] logits as [texts, aspects, 4]."""
    return logits.reshape(len(logits), aspects, len(ASPECT_POLARITIES))


def pair_figures(gold: np.ndarray, said: np.ndarray) -> dict[str, float]:
    """4-way accuracy and macro-F1 over the labelled (text, aspect) pairs; mention F1 (mentioned or not); pairs."""
    from sklearn.metrics import f1_score

    keep = gold >= 0  # UNLABELLED pairs (negative ids) left out
    g, s = gold[keep], said[keep]
    none = ASPECT_POLARITIES.index("not_mentioned")
    return {"accuracy": float((g == s).mean()) if len(g) else 0.0,
            "macro_f1": float(f1_score(g, s, labels=list(range(len(ASPECT_POLARITIES))), average="macro", zero_division=0)),
            "mention_f1": float(f1_score(g != none, s != none, zero_division=0)), "pairs": int(keep.sum())}
