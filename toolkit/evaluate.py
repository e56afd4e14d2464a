"""Scoring a dynamic-graph model on a split: logits, accuracy, macro-F1, confusion matrix."""

from __future__ import annotations

import numpy as np

from senti.serving.batching import logits_in_order


def predict_logits(model, encoded, batch_size: int = 64, pad_id: int = 0) -> np.ndarray:
    """Logits for every encoded text, in input order (batches are length-sorted internally)."""
    import paddle

    def run(input_ids, token_type_ids):
        logits = model(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids))
        return logits.astype("float32").numpy()

    was_training = model.training
    model.eval()
    with paddle.no_grad():
        out = logits_in_order(run, encoded, batch_size, pad_id)
    if was_training:
        model.train()
    return out


def classification_metrics(y_true, y_pred, labels: list[str]) -> dict:
    """Accuracy, macro-F1 and the confusion matrix (rows: true label, columns: predicted)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    k = len(labels)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (y_true, y_pred), 1)
    tp = np.diag(confusion).astype(float)
    precision = np.divide(tp, confusion.sum(0), out=np.zeros(k), where=confusion.sum(0) > 0)
    recall = np.divide(tp, confusion.sum(1), out=np.zeros(k), where=confusion.sum(1) > 0)
    f1 = np.divide(2 * precision * recall, precision + recall, out=np.zeros(k), where=(precision + recall) > 0)
    # Average over labels seen in truth or prediction, as scikit-learn's f1_score(average="macro").
    present = (confusion.sum(0) + confusion.sum(1)) > 0
    return {
        "accuracy": float(tp.sum() / max(len(y_true), 1)),
        "macro_f1": float(f1[present].mean()) if present.any() else 0.0,
        "per_class_f1": {lab: float(v) for lab, v in zip(labels, f1)},
        "confusion_matrix": confusion.tolist(),
        "labels": labels,
        "n": int(len(y_true)),
    }


def evaluate_checkpoint(model_dir, dataset: str | None = None, split: str = "test", batch_size: int = 64,
                        trust_pickle: bool = False) -> dict:
    """Score a checkpoint on one split: of the data it was trained on (cut as in training), or of `dataset`."""
    from dataclasses import asdict
    from pathlib import Path

    from senti.export.checkpoint import load_checkpoint
    from senti.toolkit.batching import encode_texts
    from senti.toolkit.data import checkpoint_splits
    from senti.toolkit.errors import SentiError

    model, tokenizer, meta = load_checkpoint(Path(model_dir), trust_pickle)
    splits, recipe = checkpoint_splits(Path(model_dir), meta, dataset)
    rows = splits.split(split)
    if not rows:
        raise SentiError(f"{recipe.dataset}: the {split} split is empty")
    labels = meta.labels
    unknown = sorted({e.label for e in rows} - set(labels))
    if unknown:
        raise SentiError(f"{recipe.dataset} {split}: labels {unknown} are not among the model's labels {labels}")
    encoded, truncated = encode_texts(tokenizer, [e.text for e in rows], meta.max_seq_len)
    y_true = [labels.index(e.label) for e in rows]
    y_pred = predict_logits(model, encoded, batch_size).argmax(1)
    result = classification_metrics(y_true, y_pred, labels)
    return {**result, "dataset": recipe.dataset, "split": split, "data": asdict(recipe), "truncated_texts": truncated,
            "model": str(Path(model_dir).resolve())}
