"""Linear layers trained on the CPU with fewer of Paddle's slow element-wise kernels.

A `paddle.nn.Linear` is a matmul and a broadcast add; its backward sums the output's gradient over every token for
the bias. On the CPU, Paddle's broadcast add and that column sum run single-threaded and slowly (a [4096, 1248] sum
over the first axis took 36 ms where the matmul beside it took 15; PyTorch's sum 0.6), so a Linear's step cost
nearly twice its matrix products. `Dense` computes the same layer with matrix products only: the bias rides in
the matmul as an extra row of the weight against a column of ones, and its gradient is a row of ones times the
output's gradient. Measured on 4096 tokens, forward and backward (`python -m experiments.dense_linear`): 312 to
1,248 wide 103.6 -> 51.5 ms, 1,248 to 312 wide 45.1 -> 37.9 ms. The results agree with Paddle's Linear to float
rounding (the test compares values and gradients).

`use_dense(model)` switches every Linear of a model to it, for training on the CPU only: on a GPU the add and the
sum are cheap. The layers and their parameters are unchanged, so checkpoints, export and inference see an
ordinary model.
"""

from __future__ import annotations

from functools import partial

import paddle
from paddle.autograd import PyLayer


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
        rows, weight = ctx.saved_tensor()
        grad_rows = grad.reshape([-1, grad.shape[-1]])
        want_x, want_weight, want_bias = ctx.wanted  # a frozen input gets no gradient (None)
        grad_x = (paddle.matmul(grad_rows, weight, transpose_y=True).reshape(grad.shape[:-1] + [weight.shape[0]])
                  if want_x else None)
        grad_weight = paddle.matmul(rows, grad_rows, transpose_x=True) if want_weight else None
        grad_bias = (paddle.matmul(paddle.ones([1, grad_rows.shape[0]], grad.dtype), grad_rows).reshape([-1])
                     if want_bias else None)
        return grad_x, grad_weight, grad_bias


def _forward(layer, x):
    return Dense.apply(x, layer.weight, layer.bias)


def use_dense(model) -> int:
    """Every `paddle.nn.Linear` of `model` with a bias computes through `Dense` from now on; returns how many."""
    switched = 0
    for layer in model.sublayers(include_self=True):
        if isinstance(layer, paddle.nn.Linear) and layer.bias is not None:
            layer.forward = partial(_forward, layer)
            switched += 1
    return switched
