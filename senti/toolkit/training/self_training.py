"""Self-training on a new domain's unlabelled texts (`senti train --unlabeled POOL`): the parent checkpoint labels
a seeded sample of the pool, and its most confident answers, an equal share per class, train beside the gold
labels. The n-gram baseline senti is compared with cannot use such texts; whether they pay is measured
(docs/results/far-domains.md)."""

from __future__ import annotations

import numpy as np

from senti.core.scores import softmax
from senti.toolkit.data.splits import Example

SCORED_PER_KEPT = 4  # pool texts scored for each pseudo-labelled row wanted


def confident_rows(probs: np.ndarray, confidence: float, most: int) -> list[int]:
    """Indices of rows whose top probability is at least `confidence`, at most `most`: each class (by its
    answer) gets an equal share, most confident first, and what a class cannot fill goes to the others' next most
    confident, so one easy class does not make the whole pseudo-labelled set."""
    answer, top = probs.argmax(1), probs.max(1)
    order = [i for i in np.argsort(-top, kind="stable") if top[i] >= confidence]
    k = probs.shape[1]
    share = most // k if k else 0
    chosen = [i for c in range(k) for i in [j for j in order if answer[j] == c][:share]]
    taken = set(chosen)
    chosen += [i for i in order if i not in taken][:most - len(chosen)]
    return sorted(int(i) for i in chosen)


def pseudo_labelled(model, tokenizer, texts: list[str], labels: list[str], max_len: int, confidence: float,
                    most: int) -> tuple[list[Example], dict, list[Example]]:
    """(rows labelled by `model`'s answers, what was kept, every text as the model answered it): the texts scored once
    as the model answers them."""
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.evaluation.evaluate import predict_logits

    if not texts:
        return [], {"scored": 0, "kept": 0}, []
    probs = softmax(predict_logits(model, encode_texts(tokenizer, texts, max_len)[0]))
    answered = [Example(text, labels[int(p.argmax())], f"unlabeled:{i + 1}") for i, (text, p) in
                enumerate(zip(texts, probs))]
    rows = [answered[i] for i in confident_rows(probs, confidence, most)] if most else []
    per_label = {lab: sum(r.label == lab for r in rows) for lab in labels}
    return rows, {"scored": len(texts), "kept": len(rows), "confidence": confidence, "per_label": per_label}, answered
