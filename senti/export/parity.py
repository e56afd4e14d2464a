"""Proof that every exported format gives the dynamic graph's answers, on real texts and several shapes."""

from __future__ import annotations

import numpy as np

from senti.core.batching import logits_in_order
from senti.serving.backends import FORMATS
from senti.serving.export_folder import fp_match

# Batch shapes checked: one text at a time (no padding) and full length-sorted batches.
SINGLE_TEXTS = 16
BATCH_SIZE = 32


def logits_by_shape(fn, encoded) -> dict[str, np.ndarray]:
    return {f"batch_{BATCH_SIZE}": logits_in_order(fn, encoded, BATCH_SIZE),
            "batch_1": logits_in_order(fn, encoded[:SINGLE_TEXTS], 1)}


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


def judge(fmt: str, result: dict, reference_accuracy: float) -> dict:
    """Add `fit` and `reason` by the format's tolerance in `FORMATS`: fp32 must match, fp16 nearly,
    INT8 may cost at most its accuracy drop."""
    kind, limit = FORMATS[fmt].tolerance
    if kind == "accuracy_drop":
        drop = reference_accuracy - result["accuracy"]
        result["accuracy_drop"] = drop
        ok = drop <= limit
        reason = f"accuracy drop {drop:+.4f} {'within' if ok else 'beyond'} {limit}"
    else:
        ok = fp_match(result["max_abs_logit_diff"], result["label_agreement"], limit)
        reason = (f"max |logit diff| {result['max_abs_logit_diff']:.2e} (limit {limit:.0e}), "
                  f"label agreement {result['label_agreement']:.4f} (must be 1)")
    return {**result, "fit": bool(ok), "reason": reason}
