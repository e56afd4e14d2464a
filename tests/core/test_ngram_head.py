"""senti.core.ngram_head: the hashed n-gram keys, the dev-chosen weight of the head and the logit adjustment."""

from __future__ import annotations

import numpy as np

BUCKETS = 1009


def test_ngram_keys_are_exact_per_order_and_skip_padding():
    import paddle

    from senti.core.ngram_head import ngram_keys

    ids = paddle.to_tensor(np.array([[2, 7, 8, 9, 3, 0, 0]], dtype="int64"))
    (uni, m1), (bi, m2), (tri, m3) = ngram_keys(ids, vocab_size=10, buckets=BUCKETS, pad_id=0)
    assert uni.numpy().tolist() == [[2, 7, 8, 9, 3, 0, 0]]
    assert m1.numpy().tolist() == [[1, 1, 1, 1, 1, 0, 0]]
    # bigram (7, 8) -> 7 * 10 + 8 + 10 (the order's offset); trigram (7, 8, 9) -> 789 + 10 + 100, all mod 1009
    assert bi.numpy()[0, 1] == 88 and tri.numpy()[0, 1] == (789 + 110) % BUCKETS
    assert m2.numpy().tolist() == [[1, 1, 1, 1, 0, 0]] and m3.numpy().tolist() == [[1, 1, 1, 0, 0]]
    assert (bi.numpy() < BUCKETS).all() and (tri.numpy() >= 0).all()


def test_best_weight_picks_the_grid_value_most_accurate_on_dev():
    from senti.core.ngram_head import best_weight

    gold = np.array([0, 1, 0, 1])
    deep = np.array([[2.0, 0.0], [0.2, 0.0], [2.0, 0.0], [0.0, 2.0]])  # wrong on the second text, barely
    wide = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])  # right everywhere
    weight, accuracy = best_weight(deep, wide, gold)
    assert accuracy == 1.0 and 0 < weight <= 1.0  # the smallest weight that mends the second text
    assert best_weight(wide, deep, gold)[0] == 0.0  # the first side alone is best: weight 0


def test_the_logit_adjustment_recalls_a_rare_class_and_stays_off_when_it_does_not_help():
    from senti.core.ngram_head import adjustment_offsets, best_tau
    from senti.core.scores import confusion_matrix, macro_f1

    rng = np.random.default_rng(1)
    gold = np.array([0] * 180 + [1] * 20)
    scores = rng.normal(size=(200, 2))
    scores[:, 0] += 1.5  # the model leans to the frequent class: the rare one's texts score a little higher there
    scores[gold == 1, 1] += 1.2
    counts = np.array([900, 100])
    tau, f1 = best_tau(scores, gold, counts)
    assert tau > 0 and f1 > macro_f1(confusion_matrix(gold, scores.argmax(1), 2))
    offsets = adjustment_offsets(counts, tau)
    assert offsets[1] > offsets[0]  # the rare class is lifted
    # balanced classes: every offset equal, no answer moves, so the smallest tau (0) is kept
    assert best_tau(scores, gold, np.array([500, 500]))[0] == 0.0


def test_the_features_a_linear_model_is_fitted_on_are_what_the_head_reads():
    """`ngram_features @ table` equals the head's n-gram logits (padding left out), so a table fitted outside
    Paddle answers the same inside it; a binary model's coefficients split into two columns keep its probabilities."""
    import paddle

    from senti.core.ngram_head import model_class, ngram_features, table_from_linear
    from senti.toolkit.training.models import ernie_config

    paddle.seed(0)
    model = model_class()(ernie_config("2l-128h", 50, ["a", "b", "c"], 32, ngram_buckets=BUCKETS))
    table = np.random.default_rng(0).normal(size=(BUCKETS, 3)).astype("float32")
    model.ngram_table.weight.set_value(table)
    encoded = [[2, 7, 8, 9, 3], [2, 11, 3], [2, 40, 41, 42, 43, 44, 3]]
    padded = np.zeros((3, 7), dtype="int64")
    for row, ids in enumerate(encoded):
        padded[row, : len(ids)] = ids
    inside = model.ngram_logits(paddle.to_tensor(padded)).numpy()
    outside = ngram_features(encoded, 50, BUCKETS) @ table
    assert np.abs(inside - outside).max() < 1e-5
    w = np.array([[0.5, -1.0, 2.0]])
    two = table_from_linear(w, 2)
    assert two.shape == (3, 2) and np.allclose(two[:, 1] - two[:, 0], w[0])
    assert table_from_linear(np.ones((3, 4)), 3).shape == (4, 3)
