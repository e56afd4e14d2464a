"""Inference backends over an export folder: ONNX Runtime (fp32, optimized, INT8, fp16) and Paddle Inference.

Each backend is a callable `(input_ids, token_type_ids) -> logits` on int64 numpy arrays, fed by
input name, so a graph whose inputs come in another order still receives the right tensors.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from serving import layout
from serving.errors import ArtifactError
from serving.runtime import available_cores

BACKENDS = ("paddle", "onnx", "onnx-opt", "onnx-int8", "onnx-fp16")


def ort_session(path: Path, threads: int | None = None, device: str = "cpu"):
    """An ONNX Runtime session with thread counts set for the machine (also what bench's ceiling times)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    # One intra-op pool sized to the cores; inter-op parallelism only oversubscribes them.
    options.intra_op_num_threads = threads or available_cores()
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    providers = ["CPUExecutionProvider"]
    if device == "gpu":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ArtifactError("device 'gpu' needs onnxruntime-gpu (pip install 'senti[gpu]')")
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), options, providers=providers)


class OnnxBackend:
    """An ONNX Runtime session over one exported graph."""

    def __init__(self, path: Path, threads: int | None = None, device: str = "cpu"):
        self.session = ort_session(path, threads, device)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_name = self.session.get_outputs()[0].name
        self.name = f"onnxruntime ({Path(path).name})"

    def __call__(self, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": input_ids, "token_type_ids": token_type_ids}
        logits = self.session.run([self.output_name], {n: feeds[n] for n in self.input_names})[0]
        return logits.astype(np.float32, copy=False)


def paddle_predictor(folder: Path, threads: int | None = None, device: str = "cpu", onednn: bool = True):
    """A Paddle Inference predictor over a model folder (also what bench's ceiling times)."""
    import paddle.inference as paddle_infer

    model_file, params_file = layout.paddle_model_files(folder)
    config = paddle_infer.Config(model_file, params_file)
    if device == "gpu":
        config.enable_use_gpu(256, 0)
    else:
        config.disable_gpu()
        config.set_cpu_math_library_num_threads(threads or available_cores())
        if onednn:
            config.enable_mkldnn()
        else:
            config.disable_mkldnn()
    config.disable_glog_info()
    return paddle_infer.create_predictor(config)


class PaddleBackend:
    """A Paddle Inference predictor (oneDNN on CPU by default)."""

    def __init__(self, folder: Path, threads: int | None = None, device: str = "cpu", onednn: bool = True):
        self.predictor = paddle_predictor(folder, threads, device, onednn)
        self.input_names = self.predictor.get_input_names()
        self.output_name = self.predictor.get_output_names()[0]
        self.name = f"paddle inference ({'gpu' if device == 'gpu' else 'onednn' if onednn else 'cpu'})"

    def __call__(self, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": input_ids, "token_type_ids": token_type_ids}
        for name in self.input_names:
            self.predictor.get_input_handle(name).copy_from_cpu(np.ascontiguousarray(feeds[name]))
        self.predictor.run()
        return self.predictor.get_output_handle(self.output_name).copy_to_cpu().astype(np.float32, copy=False)


def open_backend(export_dir: Path, backend: str, threads: int | None = None, device: str = "cpu", **options):
    """The named backend over `export_dir`; a clear error when that format was not exported."""
    export_dir = Path(export_dir)
    if backend not in BACKENDS:
        raise ArtifactError(f"unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}")
    if backend == "paddle":
        folder = export_dir / layout.PADDLE_DIR
        if not folder.is_dir():
            raise ArtifactError(f"{export_dir}: no Paddle Inference model (exported without --formats paddle?)")
        return PaddleBackend(folder, threads, device, **options)
    path = export_dir / layout.ONNX_FILES[backend]
    if not path.is_file():
        raise ArtifactError(f"{export_dir}: no {path.name} (backend '{backend}' was not exported)")
    return OnnxBackend(path, threads, device)
