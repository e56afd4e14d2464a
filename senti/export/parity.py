"""Measuring an exported format against the dynamic graph, on real texts and several shapes; the verdict is
`senti.serving.parity.judge`, the same module that judges an export again at every load."""

from __future__ import annotations

import numpy as np

from senti.core.batching import logits_in_order

# Batch shapes checked: one text at a time (no padding) and full length-sorted batches.
SINGLE_TEXTS = 16
BATCH_SIZE = 32


def logits_by_shape(fn, encoded, pad_id: int) -> dict[str, np.ndarray]:
    return {f"batch_{BATCH_SIZE}": logits_in_order(fn, encoded, BATCH_SIZE, pad_id),
            "batch_1": logits_in_order(fn, encoded[:SINGLE_TEXTS], 1, pad_id)}


def answers(logits: np.ndarray, groups: int) -> np.ndarray:
    """[texts, groups] answers: the argmax within each group of outputs (one group for a sentence model, one per
    aspect for aspect heads, senti.core.aspects.head_labels)."""
    return logits.reshape(len(logits), groups, -1).argmax(-1)


def gold_accuracy(logits: np.ndarray, gold: np.ndarray) -> float:
    """Accuracy over the labelled answers: `gold` [texts, groups] of ids within each group, -1 where unlabelled
    ([texts]: a sentence model's label ids)."""
    gold = gold.reshape(len(gold), -1)
    keep = gold >= 0
    return float((answers(logits, gold.shape[1])[keep] == gold[keep]).mean()) if keep.any() else 0.0


def compare(reference: dict, candidate: dict, gold: np.ndarray) -> dict:
    """Max |logit difference| and answer agreement against the reference on each shape, and accuracy; `gold`
    as `gold_accuracy` takes it."""
    groups = gold.reshape(len(gold), -1).shape[1]
    diffs = {shape: float(np.abs(reference[shape] - candidate[shape]).max()) for shape in reference}
    ref_labels = answers(reference[f"batch_{BATCH_SIZE}"], groups)
    labels = answers(candidate[f"batch_{BATCH_SIZE}"], groups)
    single_agree = (answers(reference["batch_1"], groups) == answers(candidate["batch_1"], groups)).mean()
    single = len(candidate["batch_1"])
    return {
        "max_abs_logit_diff": max(diffs.values()),
        # the same texts alone and in length-sorted batches of 32: how much batch-mates move an answer
        "max_batch_dependence": float(np.abs(candidate["batch_1"] - candidate[f"batch_{BATCH_SIZE}"][:single]).max()),
        "max_abs_logit_diff_by_shape": diffs,
        "label_agreement": float(min((labels == ref_labels).mean(), single_agree)),
        "accuracy": gold_accuracy(candidate[f"batch_{BATCH_SIZE}"], gold),
        "texts": int(len(gold)),
    }
