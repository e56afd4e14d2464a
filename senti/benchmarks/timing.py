"""Timing helpers: warm-up excluded, medians and percentiles of repeated runs, the environment recorded."""

from __future__ import annotations

import platform
import time

import numpy as np


def time_calls(fn, repeats: int, warmup: int = 2, budget_s: float | None = None) -> list[float]:
    """Seconds per call of `fn()` over `repeats` runs after `warmup` untimed ones (stops early past budget_s)."""
    for _ in range(warmup):
        fn()
    seconds, started = [], time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        seconds.append(time.perf_counter() - t0)
        if budget_s is not None and time.perf_counter() - started > budget_s and len(seconds) >= 3:
            break
    return seconds


def summarize(seconds: list[float]) -> dict:
    """Median, spread and tail percentiles in milliseconds."""
    ms = np.asarray(seconds) * 1000
    return {
        "p50": float(np.percentile(ms, 50)), "p95": float(np.percentile(ms, 95)),
        "p99": float(np.percentile(ms, 99)), "mean": float(ms.mean()), "min": float(ms.min()),
        "max": float(ms.max()), "iqr": float(np.percentile(ms, 75) - np.percentile(ms, 25)), "n": int(len(ms)),
    }


def environment() -> dict:
    """Machine and library facts stored with every measurement."""
    from senti.core.runtime import package_versions, runtime_record

    env = {"python": platform.python_version(), "platform": platform.platform(), **runtime_record().to_json(),
           **package_versions()}
    try:
        import paddle

        if paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count():
            props = paddle.device.cuda.get_device_properties(0)
            env["gpu"] = props.name
            env["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
            env["cuda"] = paddle.version.cuda()
    except Exception:  # no paddle or no driver: a CPU record
        pass
    try:
        import psutil

        env["memory_gib"] = round(psutil.virtual_memory().total / 2**30, 1)
    except ImportError:
        pass
    return env
