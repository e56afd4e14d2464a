"""Scoring a dynamic-graph model on a split: logits, accuracy, macro-F1, confusion matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from senti.core.batching import logits_in_order
from senti.toolkit.seen import seen_figures


def predict_logits(model, encoded, batch_size: int = 64, pad_id: int = 0, parts: bool = False):
    """Logits for every encoded text, in input order (batches are length-sorted internally); with `parts`, a
    model with the n-gram head answers (ERNIE's logits, the n-gram side's logits)."""
    import paddle

    def run(input_ids, token_type_ids):
        out = model(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids),
                    **({"return_parts": True} if parts else {}))
        if parts:
            return np.concatenate([o.astype("float32").numpy() for o in out], axis=1)
        return out.astype("float32").numpy()

    was_training = model.training
    model.eval()
    with paddle.no_grad():
        out = logits_in_order(run, encoded, batch_size, pad_id)
    if was_training:
        model.train()
    if parts:
        return out[:, : out.shape[1] // 2], out[:, out.shape[1] // 2:]
    return out


def classification_metrics(y_true, y_pred, labels: list[str]) -> dict:
    """Accuracy, macro-F1, per-class precision, recall and F1, and the confusion matrix (rows: true label,
    columns: predicted)."""
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
        "per_class_precision": {lab: float(v) for lab, v in zip(labels, precision)},
        "per_class_recall": {lab: float(v) for lab, v in zip(labels, recall)},
        "per_class_f1": {lab: float(v) for lab, v in zip(labels, f1)},
        "support": {lab: int(v) for lab, v in zip(labels, confusion.sum(1))},
        "confusion_matrix": confusion.tolist(),
        "labels": labels,
        "n": int(len(y_true)),
    }


def _rows_to_score(meta_labels: list[str], recipe, dataset: str | None, split: str, where: Path,
                   seed: int | None = None):
    """(rows, data record): one split cut as the model's recipe says (or `dataset` cut with `seed`), or every row."""
    from dataclasses import asdict

    from senti.core.errors import SentiError
    from senti.toolkit.data import load_all_rows, recorded_splits

    if split == "all":
        source = dataset or (recipe.dataset if recipe else None)
        if source is None:
            raise SentiError(f"{where} does not record what it was trained on; pass --dataset")
        columns = dict(text_column=recipe.text_column, label_column=recipe.label_column) \
            if recipe and source == recipe.dataset else {}
        rows, data = load_all_rows(source, **columns), {"dataset": source, "split": "all"}
    else:
        splits, chosen = recorded_splits(where, recipe, dataset, seed)
        rows, data = splits.split(split), asdict(chosen)
    if not rows:
        raise SentiError(f"{data['dataset']}: the {split} split is empty")
    unknown = sorted({e.label for e in rows} - set(meta_labels))
    if unknown:
        raise SentiError(f"{data['dataset']} {split}: labels {unknown} are not among the model's labels {meta_labels}")
    return rows, data


def baseline_beside(where: Path, recipe, dataset: str | None, rows, labels: list[str],
                    seed: int | None = None) -> dict:
    """The n-gram baseline fitted on the training split the model learned from (or, for a model that records
    none, `dataset`'s cut with `seed`, as `rows` were), scored on `rows`: what the cheapest honest model gets on
    the same texts."""
    from senti.core.errors import DataError
    from senti.toolkit.baseline import baseline_figures
    from senti.toolkit.data import recorded_splits

    try:
        splits, _ = recorded_splits(where, recipe, *((dataset, seed) if recipe is None else (None, None)))
    except DataError as err:  # no training rows to fit it on (a test-only folder, a model that records no data)
        return {"model": None, "skipped": str(err)}
    train = [e for e in splits.train if e.label in labels]
    return baseline_figures([e.text for e in train], [e.label for e in train], labels,
                            {"scored": ([e.text for e in rows], [e.label for e in rows])})


def evaluate_checkpoint(model_dir, dataset: str | None = None, split: str = "test", batch_size: int = 64,
                        trust_pickle: bool = False, baseline: bool = True, seed: int | None = None) -> dict:
    """Score a checkpoint on one split of the data it was trained on (cut as in training), of `dataset`,
    or on every row (`split="all"`)."""
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.batching import encode_texts

    model, tokenizer, meta = load_checkpoint(Path(model_dir), trust_pickle)
    rows, data = _rows_to_score(meta.labels, meta.splits, dataset, split, Path(model_dir), seed)
    encoded, truncated = encode_texts(tokenizer, [e.text for e in rows], meta.max_seq_len)
    y_pred = predict_logits(model, encoded, batch_size).argmax(1)
    gold = [meta.labels.index(e.label) for e in rows]
    result = classification_metrics(gold, y_pred, meta.labels)
    extra: dict = {"baseline": baseline_beside(Path(model_dir), meta.splits, dataset, rows, meta.labels, seed)} if baseline \
        else {}
    extra["seen_in_training"] = seen_figures(Path(model_dir), [e.text for e in rows], np.array(gold), y_pred)
    return {**result, "dataset": data["dataset"], "split": split, "data": data, "truncated_texts": truncated,
            "model": str(Path(model_dir).resolve()), "backend": "paddle dynamic graph", **extra}


def evaluate_export(export_dir, dataset: str | None = None, split: str = "test", batch_size: int = 64,
                    backend: str = "auto", baseline: bool = True, seed: int | None = None) -> dict:
    """Score an export folder with the runtime that serves it (`backend`, default what `auto` picks): the
    accuracy of the model as deployed, INT8 included."""
    from senti.core.artifacts import SplitRecipe
    from senti.serving import Predictor

    predictor = Predictor.load(export_dir, backend=backend)
    recipe = SplitRecipe(**predictor.meta.data) if predictor.meta.data else None
    rows, data = _rows_to_score(predictor.labels, recipe, dataset, split, Path(export_dir), seed)
    logits, _, too_long = predictor.logits([e.text for e in rows], batch_size)
    gold = [predictor.labels.index(e.label) for e in rows]
    result = classification_metrics(gold, logits.argmax(1), predictor.labels)
    extra: dict = {"baseline": baseline_beside(Path(export_dir), recipe, dataset, rows, predictor.labels, seed)} if baseline \
        else {}
    extra["seen_in_training"] = seen_figures(Path(export_dir), [e.text for e in rows], np.array(gold),
                                             logits.argmax(1))
    return {**result, **extra, "dataset": data["dataset"], "split": split, "data": data, "truncated_texts": int(sum(too_long)),
            "model": str(Path(export_dir).resolve()), "backend": predictor.backend_name}


def evaluate_model(model_dir, dataset: str | None = None, split: str = "test", batch_size: int = 64,
                   trust_pickle: bool = False, backend: str = "auto", baseline: bool = True,
                   seed: int | None = None) -> dict:
    """A checkpoint (dynamic graph) or an export folder (its serving runtime), whichever `model_dir` is."""
    from senti.core import layout

    if (Path(model_dir) / layout.EXPORT_META).is_file():
        return evaluate_export(model_dir, dataset, split, batch_size, backend, baseline, seed)
    return evaluate_checkpoint(model_dir, dataset, split, batch_size, trust_pickle, baseline, seed)


def choose_ngram_weight(model, dev_ids, dev_y) -> tuple[dict, np.ndarray]:
    """Set the n-gram side's weight to the one most accurate on dev (core.ngram_head.WEIGHT_GRID); returns the
    record's fields (the weight and each side's dev accuracy alone) and the model's dev logits at that weight,
    from the same one pass over dev."""
    from senti.core.ngram_head import best_weight, combine_numpy

    deep, wide = predict_logits(model, dev_ids, parts=True)
    weight, _ = best_weight(deep, wide, dev_y)
    model.config.ngram_weight = weight
    fields = {"ngram_weight": weight, "dev_accuracy_ernie": float((deep.argmax(1) == dev_y).mean()),
              "dev_accuracy_ngram": float((wide.argmax(1) == dev_y).mean())}
    return fields, combine_numpy(deep, wide, weight)


def write_evaluation(result: dict, path: Path) -> None:
    """`eval_<split>.json` through its schema (`toolkit.records.EvalRecord`): what evaluate_model returned."""
    from senti.toolkit.records import EvalRecord

    EvalRecord(**result).write_to(path)
