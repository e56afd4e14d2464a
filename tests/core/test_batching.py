"""senti.core.batching: length-sorted batches padded to their own longest text, logits back in input order."""

from __future__ import annotations

import numpy as np

from senti.core.batching import length_sorted_batches, logits_in_order, new_tally, pad_batch, padding_share


def test_batches_cover_every_text_once_in_ascending_length():
    lengths = [5, 1, 9, 3, 3, 7, 2]
    batches = length_sorted_batches(lengths, batch_size=3)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(len(lengths))) and [len(b) for b in batches] == [3, 3, 1]
    assert [lengths[i] for i in flat] == sorted(lengths)


def test_a_call_cost_cuts_a_batch_where_padding_costs_more_than_a_call():
    lengths = [2] * 30 + [100, 100]
    one_call = length_sorted_batches(lengths, batch_size=32)
    cut = length_sorted_batches(lengths, batch_size=32, call_cost_tokens=128)
    assert len(one_call) == 1 and [len(b) for b in cut] == [30, 2]


def test_pad_batch_pads_to_the_longest_of_the_batch_only():
    encoded = [[1, 2, 3], [4], [5, 6, 7, 8, 9]]
    ids, types = pad_batch(encoded, [0, 1], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [4, 0, 0]] and ids.dtype == np.int64 and not types.any()


def test_logits_come_back_in_input_order_and_the_tally_counts_the_padding():
    encoded = [[1] * n for n in (4, 1, 3, 2)]
    tally = new_tally()
    # the "model" answers each row's real length (its non-padding positions) as its logit
    logits = logits_in_order(lambda ids, types: (ids != 0).sum(1, keepdims=True).repeat(2, 1), encoded, 2,
                             tally=tally)
    assert logits[:, 0].tolist() == [4, 1, 3, 2]
    assert tally == {"calls": 2, "rows": 4, "tokens": 10, "padding": 2}  # [1, 2] -> 1 pad, [3, 4] -> 1 pad
    assert padding_share(tally) == 2 / 12
    assert logits_in_order(lambda ids, types: ids, [], 8).shape == (0, 0)
