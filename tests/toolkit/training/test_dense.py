"""Dense: a Linear's training step in matrix products only, against paddle.nn.Linear itself."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from senti.toolkit.training.dense import use_dense


def _step(layer, x, grad):
    x = paddle.to_tensor(x, stop_gradient=False)
    out = layer(x)
    out.backward(paddle.to_tensor(grad))
    grads = [x.grad.numpy()] + [p.grad.numpy() if p.grad is not None else None for p in (layer.weight, layer.bias)]
    layer.clear_gradients()
    return out.numpy(), grads


@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 5)])
def test_values_and_gradients_are_a_linears(shape):
    rng = np.random.default_rng(0)
    paddle.seed(0)
    layer = paddle.nn.Linear(5, 6)
    x = rng.standard_normal(shape).astype("float32")
    grad = rng.standard_normal(shape[:-1] + (6,)).astype("float32")
    want_out, want_grads = _step(layer, x, grad)
    assert use_dense(layer) == 1
    out, grads = _step(layer, x, grad)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_frozen_bias_gets_no_gradient_and_a_layer_without_bias_is_left_alone():
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.Linear(4, 2, bias_attr=False))
    model[0].bias.stop_gradient = True
    assert use_dense(model) == 1
    x = paddle.randn([3, 4])
    model(x).sum().backward()
    assert model[0].bias.grad is None and model[0].weight.grad is not None and model[1].weight.grad is not None


def test_a_model_trains_the_same_through_dense():
    """Ten AdamW steps of a small two-layer net from the same start: the weights end where Linear's do."""
    def train(dense: bool):
        paddle.seed(1)
        model = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.GELU(), paddle.nn.Linear(16, 3))
        if dense:
            use_dense(model)
        optimizer = paddle.optimizer.AdamW(learning_rate=0.01, parameters=model.parameters())
        data = np.random.default_rng(2)
        for _ in range(10):
            x = paddle.to_tensor(data.standard_normal((16, 8)).astype("float32"))
            y = paddle.to_tensor(data.integers(0, 3, 16))
            paddle.nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.clear_grad()
        return [p.numpy() for p in model.parameters()]

    for got, want in zip(train(True), train(False)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
