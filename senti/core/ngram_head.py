"""The n-gram head: hashed character 1-3-grams of the token ids, a linear layer beside ERNIE, in one graph.

On ChnSentiCorp a character n-gram logistic regression beats a small ERNIE on texts it has not seen, and the two
err differently (docs/guides/training.md). `ErnieWithNgrams` carries both: ERNIE's classifier and a linear layer over
the hashed 1-3-grams of the input ids, each trained on its own loss, answered as a weighted geometric mean of
the two distributions (log-probabilities averaged, the n-gram side weighted by `ngram_weight`, chosen on dev).
The hashing is integer arithmetic on `input_ids` inside the graph, so an export needs nothing beside the
vocabulary: Paddle Inference and ONNX Runtime run it as they run ERNIE, and every server, `senti predict` and Ray
serve it unchanged.

Paddle and PaddleNLP are imported when the class is first asked for (`model_class`), not with this module.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from senti.core.scores import confusion_matrix, log_softmax, macro_f1, mean_log_loss

# A prime number of buckets: keys (token ids of up to three tokens) spread by plain modulo. About a million
# buckets kept collisions from costing accuracy (2^18 buckets: dev 0.9183, 2^20: 0.9208, one epoch, n-grams alone).
DEFAULT_BUCKETS = 1_000_003
# The n-gram table learns at this multiple of the model's learning rate: 0.01-0.02 suited it alone
# (a logistic regression over sparse counts), 5e-4 suits the transformer.
TABLE_LR_SCALE = 40.0
# Dev-chosen weights of the n-gram side, scanned at every evaluation (0: ERNIE alone; large: n-grams alone).
WEIGHT_GRID = (0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 1000.0)
# Logit adjustment (Menon et al., "Long-tail learning via logit adjustment", 2021): the answer's scores plus
# -tau x log(the class's share of the training rows), tau chosen on dev by macro-F1 from this grid. One number, not
# one offset per class: six free offsets chosen on SMP2020's 2,000 dev texts gained on dev and lost on test.
TAU_GRID = tuple(round(0.1 * i, 1) for i in range(21))
# The largest offset a config may hold: the grid's largest tau on a class of one row in ten million is 2 x 16 = 32.
MAX_CLASS_OFFSET = 100.0


def ngram_keys(input_ids, vocab_size: int, buckets: int, pad_id: int):
    """[(bucket ids [B, T-n+1], mask [B, T-n+1]) for n = 1, 2, 3]: every n-gram of ids without padding.

    Keys are exact (id1 * V + id2, and so on, offset per order) before the modulo, so they never overflow int64 for
    vocabularies under two million tokens."""
    import paddle

    # Constants as int64 tensors, never Python numbers: `ids * 5562` becomes Paddle's `scale` op, which paddle2onnx
    # computes in float32, and keys past 2^24 then lose their last digits in ONNX (its answers differed).
    def const(value):
        return paddle.full([1], value, dtype=input_ids.dtype)

    v = const(vocab_size)
    keep = (input_ids != pad_id).astype("float32")
    bigram = input_ids[:, :-1] * v + input_ids[:, 1:]
    trigram = bigram[:, :-1] * v + input_ids[:, 2:]
    grams = ((input_ids, keep), (bigram + v, keep[:, 1:] * keep[:, :-1]),
             (trigram + const(vocab_size + vocab_size * vocab_size), keep[:, 2:] * keep[:, 1:-1] * keep[:, :-2]))
    return [(paddle.remainder(key, const(buckets)), mask) for key, mask in grams]


@cache
def model_class():
    """`ErnieWithNgrams`: ERNIE for sequence classification plus the n-gram head. `config.ngram_buckets` and
    `config.ngram_weight` are saved in config.json, so `load_checkpoint` knows to build this class."""
    import paddle
    from paddlenlp.transformers import ErnieForSequenceClassification

    class ErnieWithNgrams(ErnieForSequenceClassification):
        """See `model_class`."""

        def __init__(self, config):
            super().__init__(config)
            # Zero start (the head says nothing until it has learned); not clipped with the transformer: its sparse
            # gradients would otherwise share, and shrink, the transformer's norm budget.
            attr = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.0), learning_rate=TABLE_LR_SCALE,
                                    need_clip=False)
            self.ngram_table = paddle.nn.Embedding(config.ngram_buckets, config.num_labels, weight_attr=attr)

        def ngram_logits(self, input_ids):
            """The n-gram side's logits [B, labels]: the table's rows summed over a text's n-grams, over sqrt(count)."""
            total, count = 0.0, 0.0
            for key, mask in ngram_keys(input_ids, self.config.vocab_size, self.config.ngram_buckets,
                                        self.config.pad_token_id or 0):
                total = total + (self.ngram_table(key) * mask.unsqueeze(-1)).sum(axis=1)
                count = count + mask.sum(axis=1, keepdim=True)
            # count is a Tensor once the loop has run (there is always one n-gram order); plain annotations here
            # would go through to_static's rewriting of this method
            return total / paddle.sqrt(paddle.clip(count, min=1.0))  # type: ignore[arg-type]

        def forward(self, input_ids, token_type_ids=None, position_ids=None, attention_mask=None, return_parts=False,
                    **kwargs):
            out = super().forward(input_ids, token_type_ids=token_type_ids, position_ids=position_ids,
                                  attention_mask=attention_mask, **kwargs)
            # PaddleNLP answers a tensor, a tuple (logits first) or, with return_dict, an output object.
            deep = out.logits if hasattr(out, "logits") else out[0] if isinstance(out, tuple) else out
            wide = self.ngram_logits(input_ids)
            if return_parts:  # training: each side learns on its own loss
                return deep, wide
            combined = combine(deep, wide, float(self.config.ngram_weight))
            offsets = getattr(self.config, "class_offsets", None)
            if offsets:  # logit adjustment chosen on dev (TAU_GRID); a constant of the exported graph
                combined = combined + paddle.to_tensor(offsets, dtype=combined.dtype)
            if hasattr(out, "logits"):
                out.logits = combined
                return out
            return (combined, *out[1:]) if isinstance(out, tuple) else combined

    return ErnieWithNgrams


def combine(deep, wide, weight: float):
    """The answer of both sides: their log-probabilities averaged, the n-gram side `weight` times ERNIE's (a
    weighted geometric mean of the two distributions). Dividing by 1 + weight keeps the answer on the scale of
    one side's: a plain sum multiplied the n-gram side's float rounding by the weight (up to 1000), past the
    1e-4 an fp32 export must match."""
    import paddle.nn.functional as F

    return (F.log_softmax(deep, axis=-1) + weight * F.log_softmax(wide, axis=-1)) / (1.0 + weight)


def combine_numpy(deep: np.ndarray, wide: np.ndarray, weight: float) -> np.ndarray:
    """`combine` on arrays: what the model answers for these two sides' logits at `weight` (before any class
    offsets, which are added to it)."""
    deep, wide = log_softmax(deep.astype(np.float64)), log_softmax(wide.astype(np.float64))
    return (deep + weight * wide) / (1.0 + weight)


def adjustment_offsets(train_counts: np.ndarray, tau: float) -> list[float]:
    """-tau x log(each class's share of the training rows); a class with no row counts as one."""
    share = np.maximum(np.asarray(train_counts, dtype=np.float64), 1.0)
    return [float(x) for x in -tau * np.log(share / share.sum())]


def best_tau(scores: np.ndarray, gold: np.ndarray, train_counts: np.ndarray) -> tuple[float, float]:
    """(tau, macro-F1): the TAU_GRID value whose adjusted `scores` have the best macro-F1 on `gold` (the smallest
    such tau on ties, so 0 unless adjusting helps)."""
    k = scores.shape[1]
    scored = [(macro_f1(confusion_matrix(gold, (scores + adjustment_offsets(train_counts, t)).argmax(1), k)), -t)
              for t in TAU_GRID]
    f1, tau = max(scored)
    return -tau, f1


def best_weight(deep: np.ndarray, wide: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(weight, accuracy): the WEIGHT_GRID value whose combination of the two sides' logits is most accurate on
    `gold` (the smallest such weight on ties)."""
    scored = [(float((combine_numpy(deep, wide, w).argmax(1) == gold).mean()), -w) for w in WEIGHT_GRID]
    accuracy, weight = max(scored)
    return -weight, accuracy


def likeliest_weight(deep: np.ndarray, wide: np.ndarray, gold: np.ndarray) -> tuple[float, float]:
    """(weight, log-loss): the WEIGHT_GRID value whose combination of the two sides' logits has the lowest mean
    log-loss on `gold` (the smallest such weight on ties)."""
    scored = [(mean_log_loss(combine_numpy(deep, wide, w), gold), w) for w in WEIGHT_GRID]
    loss, weight = min(scored)
    return weight, loss


def ngram_features(encoded, vocab_size: int, buckets: int):
    """The n-gram side's input as a sparse matrix [texts, buckets]: each text's n-gram keys exactly as `ngram_keys`
    computes them (padding never enters: `encoded` holds unpadded ids), counted and divided by sqrt(how many), so
    `features @ table` is what `ngram_logits` answers. A linear model fitted on them is a table the head can hold."""
    import scipy.sparse as sp

    rows, keys, scale = [], [], []
    v = np.int64(vocab_size)
    for row, ids in enumerate(encoded):
        a = np.asarray(ids, dtype=np.int64)
        bigram = a[:-1] * v + a[1:]
        grams = np.concatenate([a, bigram + v, bigram[:-1] * v + a[2:] + (v + v * v)]) % buckets
        rows.append(np.full(len(grams), row))
        keys.append(grams)
        scale.append(np.full(len(grams), 1.0 / np.sqrt(max(len(grams), 1))))
    matrix = sp.csr_matrix((np.concatenate(scale), (np.concatenate(rows), np.concatenate(keys))),
                           shape=(len(encoded), buckets), dtype=np.float64)
    matrix.sum_duplicates()
    return matrix


def table_from_linear(coef: np.ndarray, labels: int) -> np.ndarray:
    """The head's table [buckets, labels] that answers a fitted linear model's scores (no intercept): a binary
    model's one coefficient row split as -w/2 and +w/2 (the same probabilities), a multinomial one's rows as they are."""
    coef = np.asarray(coef, dtype=np.float32)
    if labels == 2 and coef.shape[0] == 1:
        return np.stack([-coef[0] / 2, coef[0] / 2], axis=1)
    return coef.T.copy()
