"""ERNIE's masking for `senti pretrain`: which tokens to predict and what the model sees in their place."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MASKINGS = ("word", "char")  # whole jieba words (ERNIE 1.0), or single characters


@dataclass(frozen=True)
class Masking:
    """A run's masking settings, fixed for the run: the vocabulary's size and special ids, the rate, whole words
    or characters."""

    vocab_size: int
    mask_id: int
    first_normal_id: int  # random replacements are drawn from here up (no special token)
    rate: float
    whole_word: bool
    cls_id: int
    sep_id: int
    pad_id: int = 0


def mask_batch(seqs: list[np.ndarray], starts: list[np.ndarray], rng: np.random.Generator, masking: Masking):
    """(input ids [B, L], flat masked positions, original ids there) for one batch, ERNIE's 80/10/10 rule.

    Units (whole words, or characters) are chosen with probability `rate`, at least one per sequence; a chosen
    token becomes [MASK] (80%), a random token from `first_normal_id` up (10%) or stays (10%)."""
    vocab_size, mask_id, first_normal_id, rate = masking.vocab_size, masking.mask_id, masking.first_normal_id, masking.rate
    whole_word, cls_id, sep_id, pad_id = masking.whole_word, masking.cls_id, masking.sep_id, masking.pad_id
    width = max(len(s) for s in seqs) + 2
    ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    positions, labels = [], []
    for b, (seq, start) in enumerate(zip(seqs, starts)):
        n = len(seq)
        ids[b, 0], ids[b, 1:n + 1], ids[b, n + 1] = cls_id, seq, sep_id
        unit = np.cumsum(np.maximum(start, np.arange(n) == 0)) - 1 if whole_word else np.arange(n)
        chosen = rng.random(unit[-1] + 1) < rate
        if not chosen.any():
            chosen[rng.integers(len(chosen))] = True
        where = np.flatnonzero(chosen[unit])
        labels.append(seq[where].astype(np.int64))
        roll = rng.random(len(where))
        random_ids = rng.integers(first_normal_id, vocab_size, len(where))
        ids[b, where + 1] = np.where(roll < 0.8, mask_id, np.where(roll < 0.9, random_ids, seq[where]))
        positions.append(b * width + where + 1)
    return ids, np.concatenate(positions), np.concatenate(labels)
