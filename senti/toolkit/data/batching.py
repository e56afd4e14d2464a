"""Tokenize once, then batch by length so each batch pads only to its own longest text."""

from __future__ import annotations

import numpy as np

from senti.core.batching import length_sorted_batches
from senti.core.sequence import text_budget


def encode_texts(tokenizer, texts, max_seq_len: int) -> tuple[list[list[int]], int]:
    """Token ids with [CLS]/[SEP] for each text, cut to `max_seq_len`; also how many were cut.

    Same ids as `tokenizer(text, max_length=max_seq_len, truncation=True)`, in one pass that
    also counts truncation.
    """
    encoded, cut = encode_marking_cuts(tokenizer, texts, max_seq_len)
    return encoded, int(sum(cut))


def encode_marking_cuts(tokenizer, texts, max_seq_len: int) -> tuple[list[list[int]], list[bool]]:
    """`encode_texts`, with whether each text was cut."""
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    budget = text_budget(max_seq_len)
    encoded, cut = [], []
    for text in texts:
        ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))
        cut.append(len(ids) > budget)
        encoded.append([cls, *ids[:budget], sep])
    return encoded, cut


def length_bucketed_batches(lengths, batch_size: int, rng: np.random.Generator | None, pool: int = 50):
    """Index batches of similar length.

    With an rng: shuffle, sort within pools of `pool` batches, then shuffle the batch order,
    so batches are tight in length but epochs still differ. Without: sorted, for evaluation.
    """
    lengths = np.asarray(lengths)
    if rng is None:
        return length_sorted_batches(lengths, batch_size)
    order = rng.permutation(len(lengths))
    span = batch_size * pool
    batches = []
    for start in range(0, len(order), span):
        chunk = order[start : start + span]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        batches += [chunk[i : i + batch_size] for i in range(0, len(chunk), batch_size)]
    rng.shuffle(batches)
    return batches
