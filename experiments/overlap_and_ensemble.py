"""Where the baseline's lead comes from, on dev: accuracy on the dev texts that also occur in the training split
against the others, for the n-gram baseline and each checkpoint; and each checkpoint mixed with the baseline.

    python -m experiments.overlap_and_ensemble --dataset ../shared/data/chnsenticorp CHECKPOINT...
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", type=Path)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    from senti.core.checkpoint import load_checkpoint
    from senti.core.scores import softmax
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.evaluation.baseline import baseline_probabilities, fit_baseline
    from senti.toolkit.evaluation.evaluate import predict_logits

    splits = load_splits(args.dataset, seed=args.seed)
    labels = splits.labels
    train = {e.text.strip() for e in splits.train}
    seen = np.array([e.text.strip() in train for e in splits.dev])
    gold = np.array([labels.index(e.label) for e in splits.dev])
    print(f"dev: {len(gold)} texts, {int(seen.sum())} of them also in the training split")

    def line(name: str, probs: np.ndarray) -> None:
        right = probs.argmax(1) == gold
        print(f"{name:44s} all {right.mean():.4f}   in train {right[seen].mean():.4f}   "
              f"not in train {right[~seen].mean():.4f}")

    baseline = baseline_probabilities(fit_baseline([e.text for e in splits.train], [e.label for e in splits.train],
                                                   labels, args.seed), [e.text for e in splits.dev], len(labels))
    line("char n-gram baseline", baseline)
    for checkpoint in args.checkpoints:
        model, tokenizer, meta = load_checkpoint(checkpoint)
        probs = softmax(predict_logits(model, encode_texts(tokenizer, [e.text for e in splits.dev],
                                                            meta.max_seq_len)[0]))
        line(checkpoint.name, probs)
        for weight in (0.3, 0.5, 0.7, 0.8):
            line(f"  {1 - weight:.1f} x it + {weight:.1f} x baseline", (1 - weight) * probs + weight * baseline)


if __name__ == "__main__":
    main()
