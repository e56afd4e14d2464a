"""Proof that every exported format gives the dynamic graph's answers, on real texts and several shapes."""

from __future__ import annotations

import numpy as np

from export.specs import ExportSpec
from serving.batching import length_sorted_batches, pad_batch

# Batch shapes checked: one text at a time (no padding) and full length-sorted batches.
SINGLE_TEXTS = 16
BATCH_SIZE = 32


def run_all(fn, encoded, batch_size: int) -> np.ndarray:
    """Logits of `fn(input_ids, token_type_ids)` for every encoded text, in input order."""
    out = None
    for index in length_sorted_batches([len(e) for e in encoded], batch_size):
        logits = np.asarray(fn(*pad_batch(encoded, index)), dtype=np.float32)
        if out is None:
            out = np.zeros((len(encoded), logits.shape[1]), dtype=np.float32)
        out[index] = logits
    return out


def logits_by_shape(fn, encoded) -> dict[str, np.ndarray]:
    return {f"batch_{BATCH_SIZE}": run_all(fn, encoded, BATCH_SIZE),
            "batch_1": run_all(fn, encoded[:SINGLE_TEXTS], 1)}


def compare(reference: dict, candidate: dict, gold: np.ndarray) -> dict:
    """Max |logit difference| and label agreement against the reference on each shape, and accuracy."""
    diffs = {shape: float(np.abs(reference[shape] - candidate[shape]).max()) for shape in reference}
    ref_labels = reference[f"batch_{BATCH_SIZE}"].argmax(1)
    labels = candidate[f"batch_{BATCH_SIZE}"].argmax(1)
    single_agree = (reference["batch_1"].argmax(1) == candidate["batch_1"].argmax(1)).mean()
    return {
        "max_abs_logit_diff": max(diffs.values()),
        "max_abs_logit_diff_by_shape": diffs,
        "label_agreement": float(min((labels == ref_labels).mean(), single_agree)),
        "accuracy": float((labels == gold).mean()),
        "texts": int(len(gold)),
    }


def judge(fmt: str, result: dict, reference_accuracy: float, spec: ExportSpec) -> dict:
    """Add `fit` and `reason`: fp32 formats must match, fp16 nearly, INT8 may cost at most a point."""
    if fmt == "onnx-int8":
        drop = reference_accuracy - result["accuracy"]
        result["accuracy_drop"] = drop
        ok = drop <= spec.int8_max_accuracy_drop
        reason = f"accuracy drop {drop:+.4f} {'within' if ok else 'beyond'} {spec.int8_max_accuracy_drop}"
    else:
        atol = spec.fp16_atol if fmt == "onnx-fp16" else spec.fp32_atol
        ok = result["max_abs_logit_diff"] <= atol and result["label_agreement"] == 1.0
        reason = (f"max |logit diff| {result['max_abs_logit_diff']:.2e} (limit {atol:.0e}), "
                  f"label agreement {result['label_agreement']:.4f} (must be 1)")
    return {**result, "fit": bool(ok), "reason": reason}
