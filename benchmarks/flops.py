"""The limit: floating-point operations per text from the model shape, and a timed matmul as the ceiling."""

from __future__ import annotations

import time


def forward_flops(tokens: int, layers: int, hidden: int, ffn: int) -> float:
    """Multiply-adds x 2 of one text of `tokens` tokens through the encoder, pooler and classifier.

    Per layer and token: Q, K, V and output projections (4 H^2), the feed-forward pair (2 H F),
    and attention scores and their weighted sum (2 S H); embeddings are lookups, not FLOPs.
    """
    per_layer = tokens * (4 * hidden * hidden + 2 * hidden * ffn) + 2 * tokens * tokens * hidden
    return 2.0 * (layers * per_layer + hidden * hidden)


def training_flops(tokens: int, layers: int, hidden: int, ffn: int) -> float:
    """Forward plus backward: the usual 3x forward."""
    return 3.0 * forward_flops(tokens, layers, hidden, ffn)


def matmul_ceiling(device: str = "cpu", size: int = 2048, dtype: str = "float32", repeats: int = 5) -> float:
    """FLOP/s of a large square matmul in Paddle on `device`: what these kernels can reach at best."""
    import paddle

    def sync():
        if device != "cpu":  # kernels are asynchronous on accelerators; a copy back would be timed too
            paddle.device.synchronize()

    a = paddle.randn([size, size]).astype(dtype)
    b = paddle.randn([size, size]).astype(dtype)
    a @ b
    sync()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        sync()
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best
