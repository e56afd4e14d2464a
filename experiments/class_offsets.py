"""Per-class offsets against one logit-adjustment tau, chosen on dev by macro-F1, read on test, for checkpoints
with the n-gram head (the comparison behind `--logit-adjustment`).

    python -m experiments.class_offsets CHECKPOINT [CHECKPOINT ...]

For each checkpoint: both sides' logits on dev and test (one pass each), the n-gram weight as training chose it,
then (a) six free offsets by coordinate ascent over [-3, 3] and (b) one tau over core.ngram_head.TAU_GRID.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

GRID = np.linspace(-3, 3, 61)


def offsets_for(scores, gold, k, rounds=3):
    from senti.core.scores import confusion_matrix, macro_f1

    b = np.zeros(k)
    for _ in range(rounds):
        for c in range(k):
            best = (macro_f1(confusion_matrix(gold, (scores + b).argmax(1), k)), -abs(b[c]), b[c])
            for g in GRID:
                trial = b.copy()
                trial[c] = g
                best = max(best, (macro_f1(confusion_matrix(gold, (scores + trial).argmax(1), k)), -abs(g), g))
            b[c] = best[2]
    return b


def main(folders: list[str]) -> None:
    from senti.core.checkpoint import load_checkpoint, read_meta
    from senti.core.ngram_head import adjustment_offsets, best_tau, combine_numpy
    from senti.core.scores import confusion_matrix, macro_f1
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.data.splits import load_recipe
    from senti.toolkit.evaluation.evaluate import predict_logits

    for folder in folders:
        model, tokenizer = load_checkpoint(Path(folder))[:2]
        meta = read_meta(Path(folder))
        assert meta.data is not None, f"{folder}: the checkpoint records no split recipe"
        splits = load_recipe(meta.data)
        index = {lab: i for i, lab in enumerate(meta.labels)}
        k, weight = len(meta.labels), float(model.config.ngram_weight)
        counts = np.bincount([index[e.label] for e in splits.train], minlength=k)
        scores, gold = {}, {}
        for name in ("dev", "test"):
            rows = getattr(splits, name)
            deep, wide = predict_logits(model, encode_texts(tokenizer, [e.text for e in rows], meta.max_seq_len)[0],
                                        parts=True)
            scores[name], gold[name] = combine_numpy(deep, wide, weight), np.array([index[e.label] for e in rows])

        def f1(name, shift):
            return round(macro_f1(confusion_matrix(gold[name], (scores[name] + shift).argmax(1), k)), 4)

        free = offsets_for(scores["dev"], gold["dev"], k)
        tau, _ = best_tau(scores["dev"], gold["dev"], counts)
        one = np.array(adjustment_offsets(counts, tau))
        print(f"{folder}: weight {weight}; none dev {f1('dev', 0)} test {f1('test', 0)}; free offsets "
              f"{np.round(free, 2).tolist()} dev {f1('dev', free)} test {f1('test', free)}; tau {tau} "
              f"dev {f1('dev', one)} test {f1('test', one)}")


if __name__ == "__main__":
    main(sys.argv[1:])
