"""Training on the CPU without Paddle's slow kernels: senti's C kernels (native.py, kernels.c) where a C compiler
is found, else the Python kernels below (Linear layers in matrix products only, dropout with masks drawn by NumPy).

The C kernels replace a Linear's bias and its gradient, GELU, layer norm, dropout and the attention core (a 4l-312h
step 3.0x faster than with Paddle's kernels, docs/results/training-speed.md). The Python kernels, about 1.2x:

A `paddle.nn.Linear` is a matmul and a broadcast add; its backward sums the output's gradient over every token for
the bias. On the CPU, Paddle's column sum is slow: over a [4096, 1248] gradient it took 43.6 ms where the matmul
beside it took 9.7 and the same sum as a product with a row of ones 0.4, so a Linear's step cost nearly twice its
matrix products. `Dense` computes the same layer with matrix products only: the bias rides in the matmul as an
extra row of the weight against a column of ones, and its gradient is a row of ones times the output's gradient.
Measured on 4,096 tokens, forward and backward (`python -m experiments.dense_linear`): 312 to 1,248 wide 100.4 ->
52.9 ms, 1,248 to 312 wide 44.0 -> 38.0 ms; a whole 4l-312h training step 1.10x. The results agree with Paddle's
Linear to float rounding (the tests compare values, gradients and ten AdamW steps).

Paddle's CPU dropout draws each element's mask one at a time from a Mersenne twister: on attention weights of
[32, 12, 79, 79] it took 40.5 ms forward and backward. `MaskDropout` draws 16 random bits an element from NumPy's
generator in one call (a drop where they fall under p x 65,536, so p is kept to 1/65,536) and multiplies: 17.8 ms.
Its generator is seeded from the run's seed, so a run stays reproducible.

`use_cpu_kernels(model, seed)` switches every Linear with a bias, every `paddle.nn.Dropout` and every
`paddle.nn.MultiHeadAttention` (with the C kernels also every LayerNorm and GELU) to these, for training on the CPU
only: on a GPU Paddle's own kernels are fast. The layers and their parameters are unchanged, so checkpoints, export and inference
see an ordinary model.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle.autograd import PyLayer

from senti.kernels import bf16, native


class Dense(PyLayer):
    """y = x @ weight + bias for x of shape [..., in], in matrix products only (see the module's docstring)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        rows = x.reshape([-1, x.shape[-1]])
        ones = paddle.ones([rows.shape[0], 1], x.dtype)
        out = paddle.matmul(paddle.concat([rows, ones], 1), paddle.concat([weight, bias.unsqueeze(0)], 0))
        ctx.save_for_backward(rows, weight)
        ctx.wanted = (not x.stop_gradient, not weight.stop_gradient, not bias.stop_gradient)
        return out.reshape(x.shape[:-1] + [weight.shape[1]])

    @staticmethod
    def backward(ctx, grad):
        return native.linear_grads(ctx, grad, _ones_times)


def _ones_times(rows):
    """The column sums of `rows` as a product with a row of ones (Paddle's own column sum is slow on the CPU)."""
    return paddle.matmul(paddle.ones([1, rows.shape[0]], rows.dtype), rows).reshape([-1])


class MaskDropout(PyLayer):
    """Dropout (scaled in training, as Paddle's `upscale_in_train`) with the mask drawn by a NumPy generator."""

    @staticmethod
    def forward(ctx, x, p: float, rng: np.random.Generator):
        bits = np.frombuffer(rng.bytes(2 * x.size), dtype=np.uint16).reshape(x.shape)
        keep = (bits >= np.uint16(round(p * 65536))).astype(np.float32) * np.float32(1 / (1 - p))
        mask = paddle.to_tensor(keep, dtype=x.dtype)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensor()
        return grad * mask


def _linear(layer, x):
    return Dense.apply(x, layer.weight, layer.bias)


def _native_linear(layer, x):
    return native.Linear.apply(x, layer.weight, layer.bias)


def _bf16_linear(layer, x):
    return bf16.Linear.apply(x, layer.weight, layer.bias)


def _dropper(seed: int, use_native: bool):
    """Dropout in training, `drop(x, p)`: senti's C kernel or MaskDropout; p = 1 (every element dropped) is Paddle's
    own."""
    if use_native:
        seeds = native.Seeds(seed)
        kernel = partial(native.Dropout.apply, seeds=seeds)
    else:
        rng = np.random.default_rng(seed)
        kernel = partial(MaskDropout.apply, rng=rng)

    def drop(x, p: float):
        return kernel(x, p) if p < 1 else F.dropout(x, p, training=True)

    drop.seeds = seeds if use_native else None  # type: ignore[attr-defined]
    return drop


def _dropout(layer, drop, x):
    if not layer.training or layer.p == 0:
        return x
    return drop(x, float(layer.p))


def _attention(layer, drop, query, key=None, value=None, attn_mask=None, cache=None):
    """`paddle.nn.MultiHeadAttention.forward` (Paddle 3.3) with the attention weights' dropout by `drop`."""
    from paddle.nn.layer.transformer import _convert_attention_mask

    if cache is not None:  # decoding with a cache: not training; Paddle's own forward
        return type(layer).forward(layer, query, key, value, attn_mask, cache)
    key = query if key is None else key
    value = query if value is None else value
    q, k, v = layer._prepare_qkv(query, key, value, cache)
    product = paddle.matmul(x=q * (layer.head_dim**-0.5), y=k, transpose_y=True)
    if attn_mask is not None:
        product = product + _convert_attention_mask(attn_mask, product.dtype)
    weights = F.softmax(product)
    if layer.dropout and layer.training:
        weights = drop(weights, float(layer.dropout))
    out = paddle.matmul(weights, v).transpose([0, 2, 1, 3])
    out = layer.out_proj(out.reshape([0, 0, out.shape[2] * out.shape[3]]))
    return (out, weights) if layer.need_weights else out


def _key_mask(attn_mask, query):
    """A mask that adds one value per key, the same for every head and query ([batch, 1, 1, tokens], as ERNIE's
    padding mask), as [batch, tokens]; None for no mask; False for any other mask."""
    from paddle.nn.layer.transformer import _convert_attention_mask

    if attn_mask is None:
        return None
    batch, tokens = query.shape[0], query.shape[1]
    if list(attn_mask.shape) != [batch, 1, 1, tokens]:
        return False
    return _convert_attention_mask(attn_mask, query.dtype).reshape([batch, tokens])


def _native_attention(layer, drop, query, key=None, value=None, attn_mask=None, cache=None):
    """Self-attention through senti's C attention core (no head split or merge); anything else (a cache, weights
    asked for, another query than key and value, another mask form) through `_attention`."""
    mask = _key_mask(attn_mask, query) if cache is None else False
    if (mask is False or layer.need_weights or (key is not None and key is not query)
            or (value is not None and value is not query)):
        return _attention(layer, drop, query, key, value, attn_mask, cache)
    p = float(layer.dropout) if layer.training and layer.dropout else 0.0
    if p >= 1:
        return _attention(layer, drop, query, key, value, attn_mask, cache)
    q, k, v = layer.q_proj(query), layer.k_proj(query), layer.v_proj(query)
    out = native.Attention.apply(q, k, v, mask, layer.num_heads, layer.head_dim**-0.5, p, drop.seeds)
    return layer.out_proj(out)


def _plain_dropout(layer) -> bool:
    return isinstance(layer, paddle.nn.Dropout) and layer.mode == "upscale_in_train" and layer.axis is None


def _plain_norm(layer) -> bool:
    return (isinstance(layer, paddle.nn.LayerNorm) and layer.weight is not None and layer.bias is not None
            and len(layer._normalized_shape) == 1)


def _layer_norm(layer, x):
    return native.LayerNorm.apply(x, layer.weight, layer.bias, float(layer._epsilon))


def kernels_that_run(switched: dict) -> str:
    """What `use_cpu_kernels` chose, for metrics.json: `c (library)` when the C kernels took the layer norms, else
    `python (why)`."""
    said = native.status()
    if switched.get("layer_norm") or not said.startswith("c "):
        return said
    return "python (a model not in float32, or no layer the C kernels take)"


def _linear_kernel(use_native: bool, bf16: bool):
    if bf16 and not use_native:
        raise ValueError("bfloat16 Linears need senti's C kernels")
    return _bf16_linear if bf16 else _native_linear if use_native else _linear


def use_cpu_kernels(model, seed: int, dropout: bool = True, use_native: bool | None = None,
                    bf16: bool = False) -> dict:
    """Switch `model`'s layers to the kernels above; returns how many of each were switched. `seed` seeds the
    dropout masks. Linears with a bias go through `Dense`; unless `dropout` is False, dropouts and the attention
    weights' dropouts through senti's (C when `use_native`, else MaskDropout); with `use_native` (the default where
    the C kernels build) also layer norms, GELU activations and the attention core through the C kernels. The C
    kernels compute in float32 only: a model with parameters of another type gets the Python kernels. With `bf16`
    (`--amp` on a CPU that has bfloat16, bf16.why_not), Linears multiply in bfloat16 (bf16.py)."""
    if use_native is None:
        use_native = native.load() is not None
    use_native = use_native and all(p.dtype == paddle.float32 for p in model.parameters())
    linear = _linear_kernel(use_native, bf16)
    drop = _dropper(seed, use_native)
    switched = {"linear": 0, "dropout": 0, "attention": 0, "layer_norm": 0, "gelu": 0}
    for layer in model.sublayers(include_self=True):
        if isinstance(layer, paddle.nn.Linear) and layer.bias is not None:
            layer.forward = partial(linear, layer)  # type: ignore[method-assign]
            switched["linear"] += 1
        elif use_native and _plain_norm(layer):
            layer.forward = partial(_layer_norm, layer)
            switched["layer_norm"] += 1
        elif use_native and isinstance(layer, paddle.nn.GELU) and not layer._approximate:
            layer.forward = native.Gelu.apply  # type: ignore[method-assign]
            switched["gelu"] += 1
        if use_native and isinstance(layer, paddle.nn.TransformerEncoderLayer) and layer.activation is F.gelu:
            layer.activation = native.Gelu.apply  # type: ignore[assignment]
            switched["gelu"] += 1
        if not dropout:
            continue
        if _plain_dropout(layer):
            layer.forward = partial(_dropout, layer, drop)
            switched["dropout"] += 1
        elif isinstance(layer, paddle.nn.MultiHeadAttention):
            forward = _native_attention if use_native else _attention
            layer.forward = partial(forward, layer, drop)  # type: ignore[method-assign]
            switched["attention"] += 1
    return switched
