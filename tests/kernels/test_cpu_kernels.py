"""senti's CPU training kernels (Dense, MaskDropout, the attention with it; with and without the C kernels) against
Paddle's own layers."""

from __future__ import annotations

import numpy as np
import paddle
import pytest

from senti.kernels.cpu_kernels import MaskDropout, use_cpu_kernels


def _step(layer, x, grad):
    x = paddle.to_tensor(x, stop_gradient=False)
    out = layer(x)
    out.backward(paddle.to_tensor(grad))
    grads = [x.grad.numpy()] + [p.grad.numpy() if p.grad is not None else None for p in (layer.weight, layer.bias)]
    layer.clear_gradients()
    return out.numpy(), grads


@pytest.mark.parametrize("use_native", [False, True])
@pytest.mark.parametrize("shape", [(7, 5), (3, 4, 5)])
def test_values_and_gradients_are_a_linears(shape, use_native):
    rng = np.random.default_rng(0)
    paddle.seed(0)
    layer = paddle.nn.Linear(5, 6)
    x = rng.standard_normal(shape).astype("float32")
    grad = rng.standard_normal(shape[:-1] + (6,)).astype("float32")
    want_out, want_grads = _step(layer, x, grad)
    assert use_cpu_kernels(layer, 0, use_native=use_native)["linear"] == 1
    out, grads = _step(layer, x, grad)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=1e-6)
    for got, want in zip(grads, want_grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("use_native", [False, True])
def test_a_frozen_bias_gets_no_gradient_and_a_layer_without_bias_is_left_alone(use_native):
    model = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.Linear(4, 2, bias_attr=False))
    model[0].bias.stop_gradient = True
    assert use_cpu_kernels(model, 0, use_native=use_native)["linear"] == 1
    x = paddle.randn([3, 4])
    model(x).sum().backward()
    assert model[0].bias.grad is None and model[0].weight.grad is not None and model[1].weight.grad is not None


@pytest.mark.parametrize("use_native", [False, True])
def test_a_model_trains_the_same_through_dense(use_native):
    """Ten AdamW steps of a small two-layer net from the same start: the weights end where Linear's do."""
    def train(dense: bool):
        paddle.seed(1)
        model = paddle.nn.Sequential(paddle.nn.Linear(8, 16), paddle.nn.GELU(), paddle.nn.Linear(16, 3))
        if dense:
            use_cpu_kernels(model, 0, use_native=use_native)
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


def test_mask_dropout_keeps_one_minus_p_scaled_and_its_gradient_is_the_mask():
    x = paddle.ones([1000, 1000])
    x.stop_gradient = False
    out = MaskDropout.apply(x, 0.1, np.random.default_rng(3))
    values = out.numpy()
    np.testing.assert_allclose(np.unique(values), [0.0, 1 / 0.9], rtol=1e-6)
    assert abs((values != 0).mean() - 0.9) < 0.002  # a million draws: the standard error is 0.0003
    out.backward(paddle.full([1000, 1000], 2.0))
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * values, rtol=1e-6)
    again = MaskDropout.apply(paddle.ones([1000, 1000]), 0.1, np.random.default_rng(3)).numpy()
    assert (again == values).all()  # the seed decides the masks: a run stays reproducible


@pytest.mark.parametrize("use_native", [False, True])
def test_the_attention_is_paddles_without_dropout_and_drops_with_it(use_native):
    paddle.seed(4)
    attention = paddle.nn.MultiHeadAttention(16, 4, dropout=0.1)
    x = paddle.randn([2, 5, 16])
    mask = paddle.to_tensor(np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], dtype="float32")[:, None, None, :] - 1) * 1e4
    attention.eval()
    want = attention(x, attn_mask=mask).numpy()
    switched = use_cpu_kernels(attention, 0, use_native=use_native)
    assert switched == {"linear": 4, "dropout": 0, "attention": 1, "layer_norm": 0, "gelu": 0}
    np.testing.assert_allclose(attention(x, attn_mask=mask).numpy(), want, rtol=1e-5, atol=1e-6)
    attention.train()
    dropped = [attention(x, attn_mask=mask).numpy() for _ in range(2)]
    assert not np.allclose(dropped[0], dropped[1]) and not np.allclose(dropped[0], want)


@pytest.mark.parametrize("use_native", [False, True])
def test_a_paddlenlp_ernie_predicts_the_same_after_the_switch(use_native):
    from paddlenlp.transformers import ErnieConfig, ErnieForSequenceClassification

    paddle.seed(5)
    model = ErnieForSequenceClassification(ErnieConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2,
                                                       num_attention_heads=4, intermediate_size=64, num_labels=2))
    model.eval()
    ids = paddle.to_tensor(np.random.default_rng(6).integers(1, 50, (3, 7)))
    want = model(ids).numpy()
    switched = use_cpu_kernels(model, 0, use_native=use_native)
    assert switched["linear"] >= 2 * 6 and switched["attention"] == 2 and switched["dropout"] >= 2
    assert switched["layer_norm"] == (2 * 2 + 1 if use_native else 0) and switched["gelu"] == (2 if use_native else 0)
    np.testing.assert_allclose(model(ids).numpy(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("use_native", [False, True])
def test_dropout_of_one_drops_everything_as_paddles_does(use_native):
    """MaskDropout's threshold for p = 1 (65,536) does not fit its 16 bits: it raised OverflowError."""
    layer = paddle.nn.Dropout(1.0)
    use_cpu_kernels(layer, 0, use_native=use_native)
    layer.train()
    assert (layer(paddle.ones([3, 4])).numpy() == 0).all()
