"""Length-sorted batches padded only to their own longest text: shared by training, export checks and serving."""

from __future__ import annotations

import numpy as np


def length_sorted_batches(lengths, batch_size: int) -> list[np.ndarray]:
    """Index batches in ascending length; callers scatter results back with the indices."""
    order = np.argsort(np.asarray(lengths), kind="stable")
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def pad_batch(encoded, index, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, token_type_ids), int64, padded to the longest text in `index`."""
    width = max(len(encoded[i]) for i in index)
    input_ids = np.full((len(index), width), pad_id, dtype=np.int64)
    for row, i in enumerate(index):
        input_ids[row, : len(encoded[i])] = encoded[i]
    return input_ids, np.zeros_like(input_ids)
