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


def compare(reference: dict, candidate: dict, gold: np.ndarray) -> dict:
    """Max |logit difference| and label agreement against the reference on each shape, and accuracy."""
    diffs = {shape: float(np.abs(reference[shape] - candidate[shape]).max()) for shape in reference}
    ref_labels = reference[f"batch_{BATCH_SIZE}"].argmax(1)
    labels = candidate[f"batch_{BATCH_SIZE}"].argmax(1)
    single_agree = (reference["batch_1"].argmax(1) == candidate["batch_1"].argmax(1)).mean()
    single = len(candidate["batch_1"])
    return {
        "max_abs_logit_diff": max(diffs.values()),
        # the same texts alone and in length-sorted batches of 32: how much batch-mates move an answer
        "max_batch_dependence": float(np.abs(candidate["batch_1"] - candidate[f"batch_{BATCH_SIZE}"][:single]).max()),
        "max_abs_logit_diff_by_shape": diffs,
        "label_agreement": float(min((labels == ref_labels).mean(), single_agree)),
        "accuracy": float((labels == gold).mean()),
        "texts": int(len(gold)),
    }
