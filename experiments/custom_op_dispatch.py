"""What a call into senti's C kernels costs through ctypes (today's binding) against a Paddle custom operator
(`PD_BUILD_OP`, built by `paddle.utils.cpp_extension.load`), and how many calls a training step makes.

    python -m experiments.custom_op_dispatch [--threads 2] [--shape 4l-312h]

The probe is the GELU forward (exact, erf), as a custom operator and through ctypes the way native.py calls a kernel
(the output allocated by Paddle, the buffers' addresses passed), on a 16-float tensor, where the call's cost is all
dispatch, and on [32, 128, 1248]. Medians of 2,000 (50) calls, three rounds. Then one forward and backward of an
ERNIE of `--shape` (batch 32 x 128 tokens) with senti's CPU kernels counts the calls into the C library, and times
the step (median of 5), to put the per-call difference against a step.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

PROBE = r"""
#include "paddle/extension.h"
#include <cmath>
#include <vector>

std::vector<paddle::Tensor> GeluForward(const paddle::Tensor& x) {
  PD_CHECK(x.is_cpu(), "x must be a CPU tensor");
  PD_CHECK(x.dtype() == paddle::DataType::FLOAT32, "x must be float32");
  auto y = paddle::empty(x.shape(), x.dtype(), x.place());
  const float* a = x.data<float>();
  float* b = y.data<float>();
  for (int64_t i = 0; i < x.numel(); i++) b[i] = 0.5f * a[i] * (1.0f + erff(a[i] * 0.70710678118654752f));
  return {y};
}

PD_BUILD_OP(senti_probe_gelu).Inputs({"X"}).Outputs({"Y"}).SetKernelFn(PD_KERNEL(GeluForward));
"""


def _median_us(fn, calls: int) -> float:
    from experiments.dense_linear import median_seconds

    return round(median_seconds(fn, calls, warmup=min(50, calls)) * 1e6, 1)


class _Counting:
    """The C library, counting every kernel called through it."""

    def __init__(self, library):
        self.library, self.calls = library, 0

    def __getattr__(self, name):
        function = getattr(self.library, name)

        def counted(*args):
            self.calls += 1
            return function(*args)

        return counted


def _step(shape: str):
    """(one forward and backward of a `shape` ERNIE on [32, 128] random ids with senti's CPU kernels, the model)."""
    import paddle
    from paddlenlp.transformers import ErnieForSequenceClassification

    from senti.kernels.cpu_kernels import use_cpu_kernels
    from senti.toolkit.training.models import ernie_config

    model = ErnieForSequenceClassification(ernie_config(shape, 6000, ["negative", "positive"], 128))
    use_cpu_kernels(model, 0)
    ids = paddle.randint(1, 6000, [32, 128])

    def step():
        model(ids).sum().backward()
        model.clear_gradients()

    return step


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shape", default="4l-312h")
    args = parser.parse_args(argv)
    from senti.core.runtime import configure_runtime, cpu_info, import_paddle

    configure_runtime(args.threads)
    paddle = import_paddle()
    from paddle.utils.cpp_extension import load

    from senti.kernels import native

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "probe.cc").write_text(PROBE)
        op = load(name="senti_probe", sources=[str(Path(tmp) / "probe.cc")], build_directory=tmp, verbose=False)
    library = native.load()

    def through_ctypes(x):
        y = paddle.empty_like(x)
        library.senti_gelu_fwd(x.data_ptr(), y.data_ptr(), x.size)
        return y

    print(cpu_info())
    for shape, calls in (([16], 2000), ([32, 128, 1248], 50)):
        x = paddle.randn(shape)
        for _ in range(3):
            print(f"{shape}: custom operator {_median_us(lambda: op.senti_probe_gelu(x), calls)} us, ctypes "
                  f"{_median_us(lambda: through_ctypes(x), calls)} us, Paddle's gelu "
                  f"{_median_us(lambda: paddle.nn.functional.gelu(x), calls)} us")
    counting = _Counting(library)
    native.load = lambda: counting  # type: ignore[assignment]  # the PyLayers' load()
    step = _step(args.shape)
    step()
    calls, counting.calls = counting.calls, 0
    print(f"{args.shape}, batch 32 x 128: {calls} calls into the C kernels per forward and backward; step "
          f"{_median_us(step, 5) / 1000:.0f} ms (median of 5)")


if __name__ == "__main__":
    main()
