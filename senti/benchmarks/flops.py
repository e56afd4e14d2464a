"""FLOPs per text from the model shape and real token counts (benchmarks.ceiling times the limit)."""

from __future__ import annotations


def forward_flops(tokens: int, layers: int, hidden: int, ffn: int) -> float:
    """Multiply-adds x 2 of one text of `tokens` tokens through the encoder, pooler and classifier.

    Per layer and token: Q, K, V and output projections (4 H^2), the feed-forward pair (2 H F),
    and attention scores and their weighted sum (2 S H); embeddings are lookups, not FLOPs.
    """
    per_layer = tokens * (4 * hidden * hidden + 2 * hidden * ffn) + 2 * tokens * tokens * hidden
    return 2.0 * (layers * per_layer + hidden * hidden)


def training_flops(tokens: int, layers: int, hidden: int, ffn: int) -> float:
    """Forward plus backward: the usual 3x forward."""
    return 3.0 * forward_flops(tokens, layers, hidden, ffn)


def mlm_training_flops(tokens: int, scored: int, layers: int, hidden: int, ffn: int, vocab: int) -> float:
    """A masked-LM training step of one sequence: the encoder, and the head (transform and the projection over
    the vocabulary) at the `scored` positions, forward and backward."""
    return training_flops(tokens, layers, hidden, ffn) + 3.0 * 2.0 * scored * (hidden * hidden + hidden * vocab)
