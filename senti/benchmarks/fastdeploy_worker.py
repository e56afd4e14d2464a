"""Runs in the FastDeploy environment (Python 3.10, fastdeploy-python 1.0.7, numpy<2; no senti): scores the
token ids senti wrote with FastDeploy's Runtime and writes the logits back. Usage: WORKER FOLDER BACKEND."""

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def main(folder: Path, backend: str) -> None:
    import fastdeploy as fd

    spec = json.loads((folder / "spec.json").read_text(encoding="utf-8"))
    data = np.load(folder / "batches.npz")
    option = fd.RuntimeOption()
    option.use_cpu()
    option.set_cpu_thread_num(spec["threads"])
    if backend == "ort":
        option.set_model_path(spec["onnx"], "", fd.ModelFormat.ONNX)
        option.use_ort_backend()
    elif backend == "paddle":
        option.set_model_path(spec["paddle_model"], spec["paddle_params"], fd.ModelFormat.PADDLE)
        option.use_paddle_infer_backend()
    else:
        option.set_model_path(spec["onnx"], "", fd.ModelFormat.ONNX)
        option.use_openvino_backend()
    runtime = fd.Runtime(option)
    names = [runtime.get_input_info(i).name for i in range(runtime.num_inputs())]
    logits, seconds = [], []
    for i in range(spec["batches"]):
        feeds = {"input_ids": data[f"ids_{i}"], "token_type_ids": np.zeros_like(data[f"ids_{i}"])}
        t0 = time.perf_counter()
        out = runtime.infer({n: feeds[n] for n in names})[0]
        seconds.append(time.perf_counter() - t0)
        logits.append(np.asarray(out, dtype=np.float32))
    arrays: dict[str, Any] = {f"logits_{i}": x for i, x in enumerate(logits)}
    np.savez(folder / "result.npz", **arrays)
    (folder / "result.json").write_text(json.dumps({"seconds": seconds, "numpy": np.__version__,
                                                    "fastdeploy": fd.__version__}), encoding="utf-8")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
