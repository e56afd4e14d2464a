"""Inference backends over an export folder: ONNX Runtime (fp32, optimized, INT8, fp16) and Paddle Inference.

Each backend is a callable `(input_ids, token_type_ids) -> logits` on int64 numpy arrays, fed by
input name, so a graph whose inputs come in another order still receives the right tensors.
`FORMATS` is the one table of them: export, `Predictor`, parity, bench and the CLI all read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from senti.core import layout
from senti.core.errors import ArtifactError
from senti.core.runtime import available_cores, keeping_mkl_threads


def ort_session(path: Path | bytes, threads: int | None = None, device: str = "cpu", allow_spinning: bool = True):
    """An ONNX Runtime session with thread counts set for the machine (also what bench's ceiling times).

    `allow_spinning=False` stops the intra-op threads from busy-waiting for work between calls: measured
    here 1.7x faster when other work shares the cores (a server's event loop), 9% slower at batch 1 on idle
    cores, so `senti serve` turns it off and in-process scoring keeps ONNX Runtime's default.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    # One intra-op pool sized to the cores; inter-op parallelism only oversubscribes them.
    options.intra_op_num_threads = threads or available_cores()
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if allow_spinning else "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    providers = ["CPUExecutionProvider"]
    if device == "gpu":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise ArtifactError("device 'gpu' needs onnxruntime-gpu (pip install 'senti[gpu]')")
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(path if isinstance(path, bytes) else str(path), options, providers=providers)


def _quiet_run():
    """Run options that keep ONNX Runtime's logger quiet below fatal: a failed run reaches senti as an exception,
    reported in one line that names the file, and the logger printed the same failure first in red."""
    import onnxruntime as ort

    options = ort.RunOptions()
    options.log_severity_level = 4
    return options


class OnnxBackend:
    """An ONNX Runtime session over one exported graph."""

    def __init__(self, path: Path, threads: int | None = None, device: str = "cpu", allow_spinning: bool = True,
                 model: bytes | None = None):
        # `model`: the file's bytes as already read (and hashed into the version) by the caller
        self.session = ort_session(path if model is None else model, threads, device, allow_spinning)
        self.run_options = _quiet_run()
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_name = self.session.get_outputs()[0].name
        self.name = f"onnxruntime ({Path(path).name})"

    def __call__(self, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": input_ids, "token_type_ids": token_type_ids}
        logits = self.session.run([self.output_name], {n: feeds[n] for n in self.input_names}, self.run_options)[0]
        return logits.astype(np.float32, copy=False)


def paddle_predictor(folder: Path, threads: int | None = None, device: str = "cpu", onednn: bool = True):
    """A Paddle Inference predictor over a model folder (also what bench's ceiling times)."""
    from senti.core.runtime import import_paddle

    import_paddle()
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

    def __init__(self, folder: Path, threads: int | None = None, device: str = "cpu", onednn: bool = True,
                 model: None = None):
        self.predictor = paddle_predictor(folder, threads, device, onednn)
        self.input_names = self.predictor.get_input_names()
        self.output_name = self.predictor.get_output_names()[0]
        self.name = f"paddle inference ({'gpu' if device == 'gpu' else 'onednn' if onednn else 'cpu'})"

    def __call__(self, input_ids: np.ndarray, token_type_ids: np.ndarray) -> np.ndarray:
        feeds = {"input_ids": input_ids, "token_type_ids": token_type_ids}
        for name in self.input_names:
            self.predictor.get_input_handle(name).copy_from_cpu(np.ascontiguousarray(feeds[name]))
        with keeping_mkl_threads():
            self.predictor.run()
        return self.predictor.get_output_handle(self.output_name).copy_to_cpu().astype(np.float32, copy=False)


@dataclass(frozen=True)
class BackendFormat:
    """One exported format and how it is run, checked and chosen."""

    name: str
    path: str  # inside the export folder (a file, or the Paddle Inference folder)
    precision: str  # fp32 | int8 | fp16
    # ("atol", x): max |logit difference| from the dynamic graph; ("accuracy_drop", x): accuracy may fall by x
    tolerance: tuple[str, float]
    opener: Callable  # (path, threads, device, **options) -> backend callable
    cpu_rank: int | None  # order in which `auto` tries it on CPU (None: never)
    gpu_rank: int | None
    required: bool  # an export that fails its parity check fails; others are only marked unfit
    # A text's answer does not depend on the other texts in its batch. Dynamic INT8 computes its activation
    # scales per call over the whole batch, so batch-mates move a text's score (by 4e-3 on 4l-312h, docs/results/serving.md):
    # `auto` never picks such a format, because one client's traffic would change another client's scores.
    batch_independent: bool = True
    # Derived formats: made from `source` (another format's file) by export's maker of the same name, when the
    # source is written and `option` (None: always; "int8": --quantize int8; "fp16": --fp16) is asked for.
    source: str | None = None
    option: str | None = None


# The registry of exported formats by name: paddle (Paddle Inference), onnx (paddle2onnx), onnx-opt (ORT's
# transformer fusions), onnx-int8-static (calibrated QDQ), onnx-int8 (dynamic), onnx-fp16 (GPU providers).
FORMATS: dict[str, BackendFormat] = {f.name: f for f in (
    BackendFormat("paddle", layout.PADDLE_DIR, "fp32", ("atol", 1e-4), PaddleBackend, 4, 4, True),
    BackendFormat("onnx", layout.ONNX_FILES["onnx"], "fp32", ("atol", 1e-4), OnnxBackend, 3, 3, True),
    BackendFormat("onnx-opt", layout.ONNX_FILES["onnx-opt"], "fp32", ("atol", 1e-4), OnnxBackend, 2, 2, True,
                  source="onnx"),
    BackendFormat("onnx-int8-static", layout.ONNX_FILES["onnx-int8-static"], "int8", ("accuracy_drop", 0.01),
                  OnnxBackend, 1, None, False, source="onnx-opt", option="int8"),
    BackendFormat("onnx-int8", layout.ONNX_FILES["onnx-int8"], "int8", ("accuracy_drop", 0.01), OnnxBackend, None,
                  None, False, batch_independent=False, source="onnx-opt", option="int8"),
    BackendFormat("onnx-fp16", layout.ONNX_FILES["onnx-fp16"], "fp16", ("atol", 5e-2), OnnxBackend, None, 1, False,
                  source="onnx-opt", option="fp16"),
)}
BACKENDS = tuple(FORMATS)


def auto_order(device: str, int8_fast: bool | None = None) -> list[str]:
    """Formats `auto` tries, best first: static INT8 on a CPU with an INT8 dot-product instruction (VNNI, AMX;
    `int8_fast`, default: this machine's flags), fp16 on GPU, then the fp32 graphs; never a format whose answers
    depend on batch-mates. On a CPU without VNNI, INT8 runs no faster than fp32 and costs accuracy: it comes last."""
    from senti.core.runtime import int8_is_fast

    if device == "gpu":
        rank = (lambda f: f.gpu_rank)
    else:
        fast = int8_is_fast() if int8_fast is None else int8_fast
        rank = (lambda f: f.cpu_rank if fast or f.precision != "int8" or f.cpu_rank is None else 100 + f.cpu_rank)
    usable = (f for f in FORMATS.values() if rank(f) is not None and f.batch_independent)
    return [f.name for f in sorted(usable, key=rank)]


def open_backend(export_dir: Path, backend: str, threads: int | None = None, device: str = "cpu", **options):
    """The named backend over `export_dir`; a clear error when that format was not exported."""
    export_dir = Path(export_dir)
    if backend not in FORMATS:
        raise ArtifactError(f"unknown backend '{backend}'; choose one of {', '.join(BACKENDS)}")
    fmt = FORMATS[backend]
    path = export_dir / fmt.path
    if not path.exists():
        raise ArtifactError(f"{export_dir}: no {fmt.path} (backend '{backend}' was not exported)")
    return fmt.opener(path, threads, device, **options)
