"""`--amp` on a CPU: a Linear's products in bfloat16 through oneDNN's GEMM (bf16.py), the rest in float32."""

from __future__ import annotations

import json

import numpy as np
import paddle
import pytest

from senti.kernels import bf16, native
from senti.toolkit.training.config import TrainConfig

HERE = bf16.why_not()
needs_bf16 = pytest.mark.skipif(HERE is not None, reason=f"no bfloat16 training here: {HERE}")


def _rounded(x: np.ndarray) -> np.ndarray:
    """numpy's reference: float32 -> the nearest bfloat16 (ties to even), back as float32."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    top = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint32)
    return (top << 16).view(np.float32)


def _widened(t) -> np.ndarray:
    return (t.numpy().astype(np.uint32) << 16).view(np.float32)


@pytest.mark.skipif(native.load() is None, reason="senti's C kernels do not build here")
def test_rounding_to_bfloat16_is_to_nearest_even_and_keeps_nan_and_infinity():
    tie_down, tie_up = 1 + 2**-8, 1 + 3 * 2**-8  # exactly halfway: to the even neighbour, down then up
    x = np.array([1.0, tie_down, tie_up, 1 + 2**-8 + 2**-20, -2.5e-3, 3.0e38, np.inf, -np.inf, 0.0, -0.0, 1e-40],
                 np.float32)
    got = _widened(bf16.to_bf16(paddle.to_tensor(x)))
    np.testing.assert_array_equal(got, _rounded(x))
    assert got[1] == 1.0 and got[2] == 1 + 2**-6
    assert np.isnan(_widened(bf16.to_bf16(paddle.to_tensor(np.array([np.nan], np.float32))))[0])
    big = np.random.default_rng(0).standard_normal(100_003).astype(np.float32) * 1e3  # past any vector width
    np.testing.assert_array_equal(_widened(bf16.to_bf16(paddle.to_tensor(big))), _rounded(big))


@needs_bf16
def test_a_bfloat16_linear_is_the_float32_product_of_its_rounded_inputs():
    """Forward and both gradients equal float32 products of bfloat16-rounded operands (so the product really ran in
    bfloat16: float32 operands would differ from these by ~1e-3), the bias gradient in float32."""
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((3, 17, 48)).astype(np.float32), rng.standard_normal((48, 40)).astype(np.float32)
    b, g = rng.standard_normal(40).astype(np.float32), rng.standard_normal((3, 17, 40)).astype(np.float32)
    xt, wt, bt = (paddle.to_tensor(a, stop_gradient=False) for a in (x, w, b))
    y = bf16.Linear.apply(xt, wt, bt)
    (y * paddle.to_tensor(g)).sum().backward()
    rx, rw, rg = _rounded(x).reshape(-1, 48), _rounded(w), _rounded(g).reshape(-1, 40)
    np.testing.assert_allclose(y.numpy().reshape(-1, 40), rx @ rw + b, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(xt.grad.numpy().reshape(-1, 48), rg @ rw.T, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(wt.grad.numpy(), rx.T @ rg, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(bt.grad.numpy(), g.reshape(-1, 40).sum(0), rtol=1e-5, atol=1e-4)
    assert np.abs(y.numpy().reshape(-1, 40) - (x.reshape(-1, 48) @ w + b)).max() > 1e-3  # not float32


@needs_bf16
def test_an_ernie_learns_in_bfloat16_as_in_float32():
    """Twenty AdamW steps on one batch from one start: the bfloat16 Linears' loss falls as float32's does, step by
    step within a few hundredths, and is not float32's (the products really ran in bfloat16)."""
    import paddle.nn.functional as F
    from paddlenlp.transformers import ErnieConfig, ErnieForSequenceClassification

    from senti.kernels.cpu_kernels import use_cpu_kernels

    data = np.random.default_rng(8)
    ids, labels = paddle.to_tensor(data.integers(1, 60, (16, 9))), paddle.to_tensor(data.integers(0, 2, 16))

    def losses(half: bool):
        paddle.seed(6)
        model = ErnieForSequenceClassification(ErnieConfig(
            vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
        assert use_cpu_kernels(model, 0, use_native=True, bf16=half)["linear"] == 14
        optimizer = paddle.optimizer.AdamW(learning_rate=0.003, parameters=model.parameters())
        out = []
        for _ in range(20):
            loss = F.cross_entropy(model(ids), labels)
            loss.backward()
            optimizer.step()
            optimizer.clear_grad()
            out.append(float(loss))
        assert all(p.dtype == paddle.float32 for p in model.parameters())  # float32 master weights
        return np.array(out)

    half, full = losses(True), losses(False)
    assert full[-1] < 0.5 * full[0] and half[-1] < 0.5 * half[0]
    assert 1e-6 < np.abs(half - full).max() < 0.03, half - full


def test_a_cpu_without_bfloat16_says_why_in_words():
    why = bf16.why_not(flags=["avx2", "avx512f"])
    assert why is not None and "avx512_bf16" in why


def _amp_run(folder, tmp_path, **amp):
    from senti.toolkit.training.train import run_training

    messages: list[str] = []
    config = TrainConfig(model="scratch:tiny", dataset=str(folder), output_dir=str(tmp_path / "c"), epochs=1,
                         max_steps=3, amp=True, device="cpu", **amp)
    return run_training(config, say=messages.append).to_json(), [m for m in messages if m.startswith("--amp")]


def test_amp_on_a_cpu_without_bfloat16_says_why_and_trains_in_fp32(binary_folder, tmp_path, monkeypatch):
    monkeypatch.setattr(bf16, "why_not", lambda flags=None: "this CPU has neither AVX-512 BF16 nor AMX")
    metrics, said = _amp_run(binary_folder, tmp_path)
    assert metrics["precision"] == "fp32" and metrics["amp_requested"] is True
    assert said == ["--amp on this CPU: this CPU has neither AVX-512 BF16 nor AMX; training in fp32"]


def test_amp_float16_on_a_cpu_is_refused_in_one_line_and_trains_in_fp32(binary_folder, tmp_path):
    metrics, said = _amp_run(binary_folder, tmp_path, amp_dtype="float16")
    assert metrics["precision"] == "fp32" and len(said) == 1 and "use --amp-dtype bfloat16" in said[0]


@needs_bf16
def test_amp_on_a_bfloat16_cpu_trains_in_bf16_and_records_it(binary_folder, tmp_path):
    metrics, said = _amp_run(binary_folder, tmp_path)
    assert metrics["precision"] == "bf16" and "bfloat16" in said[0]
    assert np.isfinite(metrics["epochs"][0]["train_loss"])


def test_senti_info_says_what_amp_does_on_this_cpu():
    from typer.testing import CliRunner

    from senti.cli import app

    result = CliRunner().invoke(app, ["info"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "CPU --amp" in line)
    assert ("bfloat16 Linears (oneDNN)" in row) == (HERE is None)
    assert "CPU training kernels" in result.output


@needs_bf16
def test_a_student_distills_in_bf16_with_amp(tiny_checkpoint, tmp_path):
    from senti.toolkit.training.distill import DistillConfig, run_distillation

    teacher, data = tiny_checkpoint
    said: list[str] = []
    run_distillation(DistillConfig(teacher=str(teacher), student="2l-128h", dataset=str(data),
                                   output_dir=str(tmp_path / "s"), epochs=1, max_steps=3, batch_size=16, device="cpu",
                                   amp=True), say=said.append)
    metrics = json.loads((tmp_path / "s" / "metrics.json").read_text("utf-8"))
    assert metrics["precision"] == "bf16" and any("bfloat16" in m for m in said)
