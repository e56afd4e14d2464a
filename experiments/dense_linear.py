"""A Linear's training step on the CPU: Paddle's `paddle.nn.Linear` against senti's `Dense`, side by side.

    python -m experiments.dense_linear [--tokens 4096] [--hidden 312] [--inner 1248] [--repeats 20]

Forward and backward of one layer on `tokens` rows (a batch of 32 x 128), both directions of an ERNIE FFN
(hidden -> inner, inner -> hidden) and its attention projection (hidden -> hidden); then the pieces Paddle's
Linear spends its time on: the matmul, the broadcast bias add, and the bias gradient as a column sum against
the same as a product with a row of ones. Medians of `repeats` after 3 warm-up runs, in milliseconds.
"""

from __future__ import annotations

import argparse
import json
import time


def median_seconds(fn, repeats: int = 20, warmup: int = 3) -> float:
    """Seconds: the median of `repeats` calls of `fn` after `warmup` calls."""
    import numpy as np

    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def median_ms(fn, repeats: int = 20) -> float:
    """Milliseconds: the median of `repeats` calls of `fn` after 3 warm-up calls."""
    return round(median_seconds(fn, repeats) * 1e3, 2)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--hidden", type=int, default=312)
    parser.add_argument("--inner", type=int, default=1248)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    from senti.core.runtime import configure_runtime, cpu_info, import_paddle

    configure_runtime()
    paddle = import_paddle()
    from senti.kernels.cpu_kernels import Dense

    report: dict = {"cpu": cpu_info()["model"], "flags": cpu_info()["flags"], "tokens": args.tokens, "ms": {}}
    for n_in, n_out in ((args.hidden, args.inner), (args.inner, args.hidden), (args.hidden, args.hidden)):
        x = paddle.randn([args.tokens, n_in])
        x.stop_gradient = False
        layer = paddle.nn.Linear(n_in, n_out)
        grad = paddle.randn([args.tokens, n_out])
        report["ms"][f"{n_in}->{n_out}"] = {
            "paddle Linear": median_ms(lambda: layer(x).backward(grad), args.repeats),
            "senti Dense": median_ms(lambda: Dense.apply(x, layer.weight, layer.bias).backward(grad), args.repeats),
        }
    x, w, b = paddle.randn([args.tokens, args.hidden]), paddle.randn([args.hidden, args.inner]), paddle.randn([args.inner])
    y = paddle.randn([args.tokens, args.inner])
    ones = paddle.ones([1, args.tokens])
    with paddle.no_grad():
        report["ms"]["pieces"] = {
            "matmul": median_ms(lambda: paddle.matmul(x, w), args.repeats),
            "bias add (broadcast)": median_ms(lambda: y + b, args.repeats),
            "bias gradient, sum over tokens": median_ms(lambda: y.sum(0), args.repeats),
            "bias gradient, ones @ grad": median_ms(lambda: paddle.matmul(ones, y), args.repeats),
        }
    print(json.dumps(report, indent=1, ensure_ascii=False))
    return report


if __name__ == "__main__":
    main()
