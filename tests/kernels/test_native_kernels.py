"""senti's C training kernels (kernels.c through native.py), each against Paddle's own operator: values and
gradients, dropout's statistics and seeds, the build's cache and its fallback."""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import paddle
import paddle.nn.functional as F
import pytest

from senti.kernels import build, native

pytestmark = pytest.mark.skipif(native.load() is None, reason="senti's C kernels do not build here")


def _grads(fn, inputs, grad):
    for t in inputs:
        t.stop_gradient = False
        t.clear_gradient()
    out = fn(*inputs)
    (out * grad).sum().backward()
    return out.numpy(), [t.grad.numpy() for t in inputs]


def test_gelu_is_paddles_exact_gelu():
    paddle.seed(0)
    x = paddle.randn([3, 7, 40]) * 3
    grad = paddle.randn(x.shape)
    got, (dx,) = _grads(native.Gelu.apply, [x], grad)
    want, (want_dx,) = _grads(F.gelu, [x], grad)
    np.testing.assert_allclose(got, want, atol=2e-6)
    np.testing.assert_allclose(dx, want_dx, atol=2e-6)


@pytest.mark.parametrize("shape", [(2, 3, 8), (64, 79, 312)])
def test_layer_norm_is_paddles(shape):
    paddle.seed(1)
    layer = paddle.nn.LayerNorm(shape[-1])
    layer.weight.set_value(paddle.randn([shape[-1]]))
    layer.bias.set_value(paddle.randn([shape[-1]]))
    x = paddle.randn(shape) * 4 + 2
    grad = paddle.randn(shape)
    got, got_grads = _grads(lambda x, w, b: native.LayerNorm.apply(x, w, b, layer._epsilon),
                            [x, layer.weight, layer.bias], grad)
    want, want_grads = _grads(lambda x, w, b: F.layer_norm(x, shape[-1:], w, b, layer._epsilon),
                              [x, layer.weight, layer.bias], grad)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5)
    for g, w in zip(got_grads, want_grads):  # the weight's and bias's gradients sum over every row
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-3 * np.abs(w).max())


def test_a_frozen_layer_norm_gets_no_gradient():
    layer = paddle.nn.LayerNorm(6)
    layer.weight.stop_gradient = True
    layer.bias.stop_gradient = True
    x = paddle.randn([4, 6])
    x.stop_gradient = False
    native.LayerNorm.apply(x, layer.weight, layer.bias, 1e-5).sum().backward()
    assert x.grad is not None and layer.weight.grad is None and layer.bias.grad is None


def _paddle_attention(q, k, v, mask, heads):
    batch, tokens, row = q.shape
    width = row // heads

    def split(t):
        return t.reshape([batch, tokens, heads, width]).transpose([0, 2, 1, 3])

    scores = paddle.matmul(split(q) * width**-0.5, split(k), transpose_y=True)
    if mask is not None:
        scores = scores + mask.reshape([batch, 1, 1, tokens])
    out = paddle.matmul(F.softmax(scores), split(v)).transpose([0, 2, 1, 3])
    return out.reshape([batch, tokens, row])


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("batch,tokens,heads,width", [(1, 1, 1, 4), (3, 11, 4, 8), (8, 37, 12, 26)])
def test_attention_without_dropout_is_paddles(masked, batch, tokens, heads, width):
    paddle.seed(2)
    q, k, v = (paddle.randn([batch, tokens, heads * width]) for _ in range(3))
    grad = paddle.randn(q.shape)
    lengths = np.random.default_rng(3).integers(1, tokens + 1, batch)
    mask = (paddle.to_tensor((np.arange(tokens)[None, :] >= lengths[:, None]).astype("float32")) * -1e4
            if masked else None)
    seeds = native.Seeds(0)
    got, got_grads = _grads(lambda q, k, v: native.Attention.apply(q, k, v, mask, heads, width**-0.5, 0.0, seeds),
                            [q, k, v], grad)
    want, want_grads = _grads(lambda q, k, v: _paddle_attention(q, k, v, mask, heads), [q, k, v], grad)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_attention_with_dropout_matches_the_mask_it_drew():
    """With dropout, the output is the dropped weights times v: rebuilt here from the kept probabilities' pattern."""
    paddle.seed(4)
    q, k, v = (paddle.randn([2, 9, 8]) for _ in range(3))
    out = native.Attention.apply(q, k, v, None, 2, 0.5, 0.5, native.Seeds(5)).numpy()
    plain = native.Attention.apply(q, k, v, None, 2, 0.5, 0.0, native.Seeds(5)).numpy()
    again = native.Attention.apply(q, k, v, None, 2, 0.5, 0.5, native.Seeds(5)).numpy()
    assert np.array_equal(out, again)  # one seed, one mask
    assert not np.allclose(out, plain)


def test_dropout_keeps_one_minus_p_scaled_and_its_gradient_is_the_mask():
    x = paddle.ones([1000, 1000])
    x.stop_gradient = False
    out = native.Dropout.apply(x, 0.1, native.Seeds(3))
    values = out.numpy()
    np.testing.assert_allclose(np.unique(values), [0.0, 1 / 0.9], rtol=1e-6)
    assert abs((values != 0).mean() - 0.9) < 0.002  # a million draws: the standard error is 0.0003
    out.backward(paddle.full([1000, 1000], 2.0))
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * values, rtol=1e-6)
    seeds = native.Seeds(3)
    assert np.array_equal(native.Dropout.apply(paddle.ones([1000, 1000]), 0.1, seeds).numpy(), values)
    assert not np.array_equal(native.Dropout.apply(paddle.ones([1000, 1000]), 0.1, seeds).numpy(), values)


def test_linear_is_paddles_and_a_frozen_bias_gets_no_gradient():
    paddle.seed(9)
    layer = paddle.nn.Linear(12, 20)
    x = paddle.randn([3, 5, 12])
    grad = paddle.randn([3, 5, 20])
    got, got_grads = _grads(native.Linear.apply, [x, layer.weight, layer.bias], grad)
    want, want_grads = _grads(F.linear, [x, layer.weight, layer.bias], grad)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for g, w in zip(got_grads, want_grads):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    layer.clear_gradients(set_to_zero=False)
    layer.bias.stop_gradient = True
    native.Linear.apply(x, layer.weight, layer.bias).sum().backward()
    assert layer.bias.grad is None and layer.weight.grad is not None


def test_an_ernie_trains_the_same_with_the_c_kernels():
    """Ten AdamW steps of a small ERNIE without dropout from one start: the C kernels end where Paddle's do."""
    from paddlenlp.transformers import ErnieConfig, ErnieForSequenceClassification

    from senti.kernels.cpu_kernels import use_cpu_kernels

    def train(kernels: bool):
        paddle.seed(6)
        model = ErnieForSequenceClassification(ErnieConfig(
            vocab_size=60, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            num_labels=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
        if kernels:
            assert use_cpu_kernels(model, 0, use_native=True)["layer_norm"] == 5
        model.train()
        optimizer = paddle.optimizer.AdamW(learning_rate=0.01, parameters=model.parameters())
        data = np.random.default_rng(8)
        for _ in range(10):
            ids = paddle.to_tensor(data.integers(1, 60, (6, 9)))
            ids[:, 7:] = 0  # padding: the attention mask at work
            labels = paddle.to_tensor(data.integers(0, 2, 6))
            F.cross_entropy(model(ids), labels).backward()
            optimizer.step()
            optimizer.clear_grad()
        return [p.numpy() for p in model.parameters()]

    for got, want in zip(train(True), train(False)):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_the_build_is_cached_and_a_missing_compiler_is_a_clear_error(tmp_path, monkeypatch):
    built = native.build(tmp_path)
    assert built.parent == tmp_path and built.exists()
    stamp = built.stat().st_mtime_ns
    assert native.build(tmp_path) == built and built.stat().st_mtime_ns == stamp  # not built again
    assert [p.name for p in tmp_path.iterdir()] == [built.name]  # no half-written leftovers
    monkeypatch.setenv("CC", "no-such-compiler-here")
    with pytest.raises(RuntimeError, match="no C compiler"):
        native.build(tmp_path / "other")


def test_without_a_compiler_training_falls_back_to_the_python_kernels_with_one_line(tmp_path):
    import os
    import subprocess
    import sys

    script = ("import paddle\n"
              "from senti.kernels.cpu_kernels import use_cpu_kernels\n"
              "layer = paddle.nn.TransformerEncoderLayer(16, 2, 32, activation='gelu')\n"
              "print(use_cpu_kernels(layer, 0))\n")
    env = {**{k: v for k, v in os.environ.items() if k != "SENTI_REQUIRE_KERNELS"},  # the fallback, where not required
           "CC": "no-such-compiler-here", "SENTI_CACHE": str(tmp_path), "SENTI_NATIVE_KERNELS": "build"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "'layer_norm': 0" in done.stdout and "'attention': 1" in done.stdout and "'linear': 6" in done.stdout
    notes = [line for line in done.stderr.splitlines() if "C training kernels are off" in line]
    assert len(notes) == 1 and "no C compiler ('no-such-compiler-here' not found on PATH)" in notes[0]


def test_a_float64_model_gets_the_python_kernels_and_stays_float64():
    """The C kernels read float32 buffers: a float64 model switched to them would have mixed types."""
    from senti.kernels.cpu_kernels import use_cpu_kernels

    paddle.seed(15)
    model = paddle.nn.Sequential(paddle.nn.Linear(6, 8), paddle.nn.GELU(), paddle.nn.LayerNorm(8))
    model.to(dtype="float64")
    x = paddle.randn([3, 6], dtype="float64")
    want = model(x).numpy()
    switched = use_cpu_kernels(model, 0)
    assert switched["linear"] == 1 and switched["layer_norm"] == 0 and switched["gelu"] == 0
    out = model(x)
    assert out.dtype == paddle.float64
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-10, atol=1e-12)


PLANTED_C = "#include <stdio.h>\n#include <stdlib.h>\n__attribute__((constructor)) static void planted(void) {\n" \
            "  FILE *f = fopen(getenv(\"PLANTED_MARK\"), \"w\"); if (f) { fputs(\"ran\", f); fclose(f); } }\n"


def _planted_library(tmp_path, folder, key_of):
    """A library that is not senti's, named as a cache entry of senti's key (its own digest in the name), whose
    constructor writes a marker file when it is loaded."""
    import subprocess

    source = tmp_path / "planted.c"
    source.write_text(PLANTED_C)
    built = tmp_path / "planted.so"
    subprocess.run(["cc", "-shared", "-fPIC", str(source), "-o", str(built)], check=True)
    import hashlib

    target = folder / f"senti-kernels-{key_of}-{hashlib.sha256(built.read_bytes()).hexdigest()[:16]}.so"
    target.write_bytes(built.read_bytes())
    (folder / f"senti-kernels-{key_of}.so").write_bytes(built.read_bytes())  # the name senti loaded unchecked before
    return target


@pytest.mark.parametrize("how", ["writable by others", "another user's"])
def test_a_library_planted_in_an_unsafe_cache_is_never_loaded(tmp_path, how):
    import os
    import subprocess
    import sys

    real = native.build(tmp_path / "own")
    key = real.name.split("-")[2].removesuffix(".so")
    shared = tmp_path / "shared"
    (shared / "kernels").mkdir(parents=True)
    planted = _planted_library(tmp_path, shared / "kernels", key)
    if how == "writable by others":
        (shared / "kernels").chmod(0o777)  # no sticky bit: anyone may replace what is in it
    else:
        os.chown(shared / "kernels", 65534, 65534) if os.getuid() == 0 else pytest.skip("chown needs root")
        for entry in (shared / "kernels").iterdir():
            os.chown(entry, 65534, 65534)
    mark = tmp_path / "mark"
    script = ("from senti.kernels import native\nlib = native.load()\n"
              "print('LOADED', lib is not None, native.status())\n")
    env = {**os.environ, "SENTI_CACHE": str(shared), "PLANTED_MARK": str(mark), "SENTI_NATIVE_KERNELS": "build"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert not mark.exists(), "the planted library ran"
    assert "LOADED True c (senti-kernels-" in done.stdout and planted.name not in done.stdout
    notes = [line for line in done.stderr.splitlines() if "kernel cache is not safe" in line]
    assert len(notes) == 1 and ("can be written by others" in notes[0] or "belongs to another user" in notes[0])


def test_a_damaged_or_foreign_library_under_the_key_is_rebuilt(tmp_path):
    built = native.build(tmp_path)
    whole = built.read_bytes()
    built.write_bytes(whole[: len(whole) // 3])  # truncated: a Bus error when loaded, before
    again = native.build(tmp_path)
    assert again.read_bytes() == whole and native._digest(again) in again.name
    assert [p.name for p in tmp_path.iterdir()] == [again.name]
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere.so"
    again.rename(elsewhere)
    again.symlink_to(elsewhere)  # a link, even to the right bytes, is not followed: it is replaced by a file
    rebuilt = native.build(tmp_path)
    assert rebuilt == again and not rebuilt.is_symlink() and rebuilt.read_bytes() == whole


@pytest.mark.parametrize("word", ["0", "false", "False", "no", "OFF"])
def test_the_kernels_are_turned_off_by_any_usual_word(monkeypatch, word):
    monkeypatch.setenv("SENTI_NATIVE_KERNELS", word)
    assert native.kernels_off() and native.status() == f"python (SENTI_NATIVE_KERNELS={word})"
    monkeypatch.setenv("SENTI_NATIVE_KERNELS", "1")
    assert not native.kernels_off()


def test_a_compiler_given_with_flags_is_used_as_make_would(tmp_path, monkeypatch):
    """CC="cc -O2" was "not found on PATH" before."""
    monkeypatch.setenv("CC", "cc -O2")
    built = native.build(tmp_path)
    assert built.is_file() and built.parent == tmp_path


ROOT = build.SOURCE.parents[2]


def _wheel_build(tmp_path, **env) -> tuple[subprocess.CompletedProcess, list]:
    """senti's wheel built as pip installs it (setup.py's build of the kernels included), into `tmp_path`: what
    ran and the libraries the wheel holds, extracted."""
    import os
    import sys
    import zipfile

    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    libraries = []
    for wheel in tmp_path.glob("senti-*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            libraries += [Path(archive.extract(name, tmp_path / "lib")) for name in archive.namelist()
                          if name.endswith(".so")]
    return done, libraries


def test_the_build_at_install_is_loaded_and_said(tmp_path, monkeypatch):
    done, built = _wheel_build(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [p.name for p in built] == [native.INSTALLED.name] and built[0].parent.name == "kernels"
    monkeypatch.setattr(native, "INSTALLED", built[0])
    found = native._installed_library()
    assert found is not None
    library, how = found
    assert how == f"{native.INSTALLED.name}, built at install"
    x = paddle.randn([5, 7])
    y = paddle.empty_like(x)
    library.senti_gelu_fwd(x.data_ptr(), y.data_ptr(), x.size)
    np.testing.assert_allclose(y.numpy(), paddle.nn.functional.gelu(x).numpy(), rtol=1e-5, atol=1e-6)


def test_without_a_compiler_the_install_goes_on_and_says_so(tmp_path):
    done, built = _wheel_build(tmp_path, CC="no-such-compiler-here")
    assert done.returncode == 0 and built == [], done.stderr[-2000:]


@pytest.mark.parametrize("fault", ["another kernels.c", "writable by others"])
def test_a_library_built_at_install_that_is_stale_or_unsafe_is_passed_over(tmp_path, monkeypatch, caplog, fault):
    """An editable install keeps its library when kernels.c changes: a library built from another source is not
    loaded (its digest differs), nor one others can write; senti builds on first use instead."""
    library = tmp_path / "lib" / native.INSTALLED.name
    library.parent.mkdir(mode=0o755)
    source = tmp_path / "kernels.c"
    source.write_text(build.SOURCE.read_text() + ("\n/* changed */\n" if fault == "another kernels.c" else ""))
    build.compile_library(library, source)
    if fault == "writable by others":
        library.chmod(0o777)
    monkeypatch.setattr(native, "INSTALLED", library)
    assert native._installed_library() is None
    said = "was built from another kernels.c" if fault == "another kernels.c" else "can be written by others"
    assert said in caplog.text and "building them here" in caplog.text


def test_each_kernel_is_cloned_for_the_cpu_it_runs_on_not_built_for_the_builders():
    """No -march=native: each kernel is an indirect function (GCC's target_clones) that picks x86-64-v4, v3 or the
    baseline at load, so a library built at install on one machine runs on another."""
    import platform
    import shutil

    assert not any(flag.startswith("-march") for flag in build.FLAGS)
    library = native.load()._name
    if platform.machine() != "x86_64" or shutil.which("nm") is None:
        pytest.skip("clones are made on x86-64, and read here with binutils' nm")
    symbols = subprocess.run(["nm", "-D", library], capture_output=True, text=True, check=True).stdout.split("\n")
    kinds = {line.split()[-1]: line.split()[-2] for line in symbols if line.strip() and " senti_" in line}
    kernels = [name for name in native.SIGNATURES if name != "senti_use_gemm"]
    assert all(kinds[name] == "i" for name in kernels), kinds


def test_where_kernels_are_required_the_library_built_at_install_is_the_one_loaded():
    """CI installs a compiler before `make venv`: its install must have built the kernels, not left it to first use."""
    if not native.kernels_required():
        pytest.skip("SENTI_REQUIRE_KERNELS is not set")
    assert native.INSTALLED.is_file() and native.status().endswith("built at install)"), native.status()
