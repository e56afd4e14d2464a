"""The baseline beside every quality figure: a character 1-3-gram TF-IDF logistic regression (scikit-learn).

It fits in seconds on the same training split, and a model that does not beat it is not worth deploying.
"""

from __future__ import annotations

import time

import numpy as np

from senti.core.calibration import figures
from senti.toolkit.evaluation.metrics import classification_metrics

DESCRIPTION = "char 1-3-gram TF-IDF + logistic regression (C=10)"


def fit_baseline(texts: list[str], labels: list[str], label_names: list[str], seed: int = 42,
                 weights: np.ndarray | None = None):
    """A fitted scikit-learn pipeline over `texts`; its classes are indices into `label_names`. `weights`: one per
    text, how much each counts in the fit (all 1 when not given)."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline

    index = {lab: i for i, lab in enumerate(label_names)}
    pipeline = make_pipeline(
        TfidfVectorizer(analyzer="char", ngram_range=(1, 3), sublinear_tf=True, min_df=2),
        LogisticRegression(C=10, max_iter=2000, random_state=seed),
    )
    pipeline.fit(texts, [index[lab] for lab in labels], logisticregression__sample_weight=weights)
    return pipeline


def baseline_probabilities(pipeline, texts: list[str], n_labels: int) -> np.ndarray:
    """Class probabilities [n, n_labels] (a class absent from training gets 0)."""
    out = np.zeros((len(texts), n_labels))
    out[:, pipeline.classes_] = pipeline.predict_proba(texts)
    return out


def baseline_figures(train_texts, train_labels, label_names, scored: dict[str, tuple[list[str], list[str]]],
                     seed: int = 42) -> dict:
    """Fit on the training rows, score each named set: {"model", "fit_seconds", name: {accuracy, macro_f1}}."""
    started = time.perf_counter()
    pipeline = fit_baseline(train_texts, train_labels, label_names, seed)
    record: dict = {"model": DESCRIPTION, "fit_seconds": round(time.perf_counter() - started, 2),
                    "train_rows": len(train_texts)}
    index = {lab: i for i, lab in enumerate(label_names)}
    for name, (texts, labels) in scored.items():
        probabilities = baseline_probabilities(pipeline, texts, len(label_names))
        gold = np.array([index[lab] for lab in labels], dtype=np.int64)
        result = classification_metrics(gold, probabilities.argmax(1), label_names)
        record[name] = {"accuracy": result["accuracy"], "macro_f1": result["macro_f1"], "n": result["n"],
                        "calibration": figures(probabilities, gold).to_json() if len(gold) else None}
    return record
