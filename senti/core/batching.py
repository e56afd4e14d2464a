"""Length-sorted batches padded only to their own longest text: shared by training, export checks and serving."""

from __future__ import annotations

import numpy as np


def length_sorted_batches(lengths, batch_size: int, call_cost_tokens: int | None = None) -> list[np.ndarray]:
    """Index batches in ascending length; callers scatter results back with the indices.

    With `call_cost_tokens`, each batch is further cut where padding would cost more than another
    model call: a CPU call costs about a fixed number of tokens' work plus one per padded token,
    so a batch of 30 short texts and 2 long ones runs faster as two calls than as one.
    """
    order = np.argsort(np.asarray(lengths), kind="stable")
    batches = [order[i : i + batch_size] for i in range(0, len(order), batch_size)]
    if call_cost_tokens is None:
        return batches
    sizes = np.asarray(lengths)
    return [part for batch in batches for part in _cut_padding(batch, sizes[batch], call_cost_tokens)]


def _cut_padding(index: np.ndarray, lengths: np.ndarray, call_cost: int) -> list[np.ndarray]:
    """Split one ascending run into consecutive calls minimising sum(call_cost + rows x longest)."""
    n = len(index)
    best = [0.0] + [float("inf")] * n  # best[j]: cheapest cost of the first j texts
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):  # the last call takes texts i..j-1, padded to lengths[j-1]
            cost = best[i] + call_cost + (j - i) * int(lengths[j - 1])
            if cost < best[j]:
                best[j], cut[j] = cost, i
    parts, j = [], n
    while j > 0:
        parts.append(index[cut[j] : j])
        j = cut[j]
    return parts[::-1]


def model_pad_id(model) -> int:
    """The padding id a model masks (ERNIE masks attention where input_ids == config.pad_token_id; the n-gram head
    skips it): batches must be padded with it, or padded positions count as text (XLM-R's is 1, not 0)."""
    config = getattr(getattr(model, "_layers", model), "config", None)
    return int(getattr(config, "pad_token_id", 0) or 0)


def pad_batch(encoded, index, pad_id: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(input_ids, token_type_ids), int64, padded to the longest text in `index`."""
    width = max(len(encoded[i]) for i in index)
    input_ids = np.full((len(index), width), pad_id, dtype=np.int64)
    for row, i in enumerate(index):
        input_ids[row, : len(encoded[i])] = encoded[i]
    return input_ids, np.zeros_like(input_ids)


def logits_in_order(run, encoded, batch_size: int, pad_id: int = 0, call_cost_tokens: int | None = None,
                    tally: dict | None = None):
    """`run(input_ids, token_type_ids)` over length-sorted padded batches, logits back in input order.

    The one loop behind evaluation, export parity checks, benchmarks and `Predictor`: sorting by
    length keeps padding small, and the index of each batch scatters its rows back. `tally` (a dict from
    `new_tally`) adds up the calls, rows, tokens and padding positions the model was given.
    """
    out = None
    for index in length_sorted_batches([len(e) for e in encoded], batch_size, call_cost_tokens):
        input_ids, token_type_ids = pad_batch(encoded, index, pad_id)
        if tally is not None:
            real = sum(len(encoded[i]) for i in index)
            tally["calls"] += 1
            tally["rows"] += len(index)
            tally["tokens"] += real
            tally["padding"] += input_ids.size - real
        logits = np.asarray(run(input_ids, token_type_ids), dtype=np.float32)
        if out is None:
            out = np.zeros((len(encoded), logits.shape[1]), dtype=np.float32)
        out[index] = logits
    return out if out is not None else np.zeros((0, 0), dtype=np.float32)


def new_tally() -> dict:
    """Counts of what a model was given: calls, rows, real tokens and padding positions."""
    return {"calls": 0, "rows": 0, "tokens": 0, "padding": 0}


def padding_share(tally: dict) -> float:
    """Padding positions out of all positions the model computed."""
    total = tally["tokens"] + tally["padding"]
    return tally["padding"] / total if total else 0.0
