"""The ceiling: the fastest large matmul each runtime of the run reaches on this device, per precision.

A backend's fraction of the ceiling divides the FLOPs it did by the best matmul rate of its
precision across every runtime measured here (Paddle's MKL, Paddle Inference's oneDNN, ONNX
Runtime's MLAS, its INT8 kernels, and PyTorch when the peer runs), so no backend is measured
against a slower library's kernel than its own. A fraction above 1 means the FLOP count is wrong.
"""

from __future__ import annotations

import functools
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np


def best_seconds(fn, repeats: int = 5) -> float:
    """Shortest of `repeats` timed calls after one warm-up: a ceiling wants the best case."""
    fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def paddle_matmul(device: str, size: int, dtype: str) -> float:
    """Seconds of one [size, size] @ [size, size] in Paddle's dynamic graph."""
    import paddle

    # paddle's stubs leave out dtype names, which astype takes
    a = paddle.randn([size, size]).astype(dtype)  # type: ignore[arg-type]
    b = paddle.randn([size, size]).astype(dtype)  # type: ignore[arg-type]

    def call():
        a @ b
        if device != "cpu":  # kernels are asynchronous on accelerators
            paddle.device.synchronize()

    return best_seconds(call)


def _onnx_matmul_graph(path: Path, size: int) -> None:
    """x [size, size] @ a constant weight: the shape of every projection in the exported encoder."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.random.default_rng(0).standard_normal((size, size), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "ceiling",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [size, size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [size, size])], [weight])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def onnxruntime_matmul(size: int, threads: int, int8: bool) -> float:
    """Seconds of the matmul graph in ONNX Runtime; int8 goes through the export's own quantizer."""
    from senti.export.onnx_convert import quantize_int8
    from senti.serving.backends import ort_session

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "matmul.onnx"
        _onnx_matmul_graph(path, size)
        if int8:
            quantize_int8(path, Path(tmp) / "matmul-int8.onnx")
            path = Path(tmp) / "matmul-int8.onnx"
        session = ort_session(path, threads)
    x = np.random.default_rng(1).standard_normal((size, size), np.float32)
    return best_seconds(lambda: session.run(None, {"x": x}))


def paddle_inference_matmul(size: int, threads: int) -> float:
    """Seconds of the matmul saved as a static graph and run by Paddle Inference with oneDNN."""
    import paddle
    from paddle.static import InputSpec

    from senti.core import layout
    from senti.core.runtime import keeping_mkl_threads
    from senti.serving.backends import paddle_predictor

    with tempfile.TemporaryDirectory() as tmp:
        layer = paddle.nn.Linear(size, size, bias_attr=False)
        paddle.jit.save(layer, str(Path(tmp) / layout.PADDLE_PREFIX),
                        input_spec=[InputSpec([size, size], "float32", "x")])
        predictor = paddle_predictor(Path(tmp), threads, onednn=True)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    x = np.random.default_rng(1).standard_normal((size, size), np.float32)

    def call():
        handle.copy_from_cpu(x)
        with keeping_mkl_threads():
            predictor.run()

    return best_seconds(call)


def onednn_bf16_matmul(size: int) -> float:
    """Seconds of one [size, size] @ [size, size] in bfloat16 (float32 out) by the oneDNN GEMM of senti's CPU --amp."""
    import paddle

    from senti.kernels import bf16

    a, b = (bf16.to_bf16(paddle.randn([size, size])) for _ in range(2))
    return best_seconds(lambda: bf16.gemm(a, b, False, False))


def measure_ceilings(device: str, threads: int, precisions, when: str, say=print) -> list[dict]:
    """One record per runtime and precision that this run's backends use on `device`.

    A run times them at its start and again at its end (`when`), and the best of both counts:
    on a shared machine one measurement can land in a slow moment and make results look too good.
    """
    size = 8192 if device == "gpu" else 2048
    candidates = [("paddle", "fp32", lambda: paddle_matmul(device, size, "float32"))]
    if device == "cpu" and "bf16" in precisions:  # before Paddle Inference and ONNX Runtime, whose idle threads spin
        candidates.append(("onednn", "bf16", lambda: onednn_bf16_matmul(size)))
    if device == "gpu":
        candidates += [("paddle", p, functools.partial(paddle_matmul, device, size, d))
                       for p, d in (("fp16", "float16"), ("bf16", "bfloat16")) if p in precisions]
    else:
        candidates += [("paddle-inference-onednn", "fp32", lambda: paddle_inference_matmul(size, threads)),
                       ("onnxruntime", "fp32", lambda: onnxruntime_matmul(size, threads, int8=False)),
                       ("onnxruntime", "int8", lambda: onnxruntime_matmul(size, threads, int8=True))]
    records: list[dict[str, Any]] = []
    for runtime, precision, time_it in candidates:
        seconds = time_it()
        records.append({"suite": "ceiling", "runtime": runtime, "precision": precision, "size": size,
                        "when": when, "matmul_flops_per_s": 2.0 * size**3 / seconds})
        gflops = records[-1]["matmul_flops_per_s"] / 1e9
        say(f"ceiling ({when}): {runtime} {precision} {size}x{size} matmul {gflops:,.0f} GFLOP/s")
    return records


def ceiling_of(records: list[dict]) -> dict[str, float]:
    """precision -> the best matmul rate any runtime reached in it."""
    best: dict[str, float] = {}
    for r in records:
        if r["suite"] == "ceiling":
            best[r["precision"]] = max(best.get(r["precision"], 0.0), r["matmul_flops_per_s"])
    return best


def record_precision(record: dict) -> str:
    """A record's compute precision: its own, else its backend's in FORMATS (bench-only backends do fp32)."""
    from senti.serving.backends import FORMATS

    backend = FORMATS.get(record.get("backend", ""))
    return record.get("precision") or (backend.precision if backend else "fp32")


def attach_fractions(records: list[dict]) -> list[dict]:
    """Set fraction_of_ceiling on every record that did FLOPs; returns those that beat their ceiling."""
    ceilings = ceiling_of(records)
    beaten = []
    for r in records:
        if r.get("achieved_flops_per_s") is None:
            continue
        precision = record_precision(r)
        key = precision if precision in ceilings else "fp32"  # no ceiling of its own: fp32's
        if key not in ceilings:
            continue
        r["ceiling_precision"] = key
        r["fraction_of_ceiling"] = float(r["achieved_flops_per_s"] / ceilings[key])
        r["beats_ceiling"] = r["fraction_of_ceiling"] > 1.0
        if r["beats_ceiling"]:
            beaten.append(r)
    return beaten
