"""A Triton Inference Server model repository around the ONNX model: the scale-out path."""

from __future__ import annotations

import shutil
from pathlib import Path

from senti.core import layout

CONFIG = layout.TRITON_CONFIG
LABELS = layout.TRITON_LABELS


def config_pbtxt(name: str, num_labels: int, max_batch_size: int, max_queue_delay_us: int) -> str:
    """Triton's text-format ModelConfig: ONNX Runtime backend, dynamic batch and sequence length."""
    inputs = ",\n".join(
        f'  {{ name: "{n}" data_type: TYPE_INT64 dims: [ -1 ] }}' for n in layout.INPUT_NAMES
    )
    return f"""name: "{name}"
platform: "onnxruntime_onnx"
max_batch_size: {max_batch_size}
input [
{inputs}
]
output [
  {{ name: "{layout.OUTPUT_NAME}" data_type: TYPE_FP32 dims: [ {num_labels} ] label_filename: "{LABELS}" }}
]
dynamic_batching {{
  max_queue_delay_microseconds: {max_queue_delay_us}
}}
"""  # no instance_group: Triton then places one instance per GPU, or on CPU where it has none


def write_repository(root: Path, name: str, onnx_file: Path, labels: list[str],
                     max_batch_size: int = 64, max_queue_delay_us: int = 5000) -> Path:
    """Write `root/<name>/{config.pbtxt, labels.txt, 1/model.onnx}`; returns the model folder."""
    model_dir = root / name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(onnx_file, model_dir / "1" / layout.TRITON_MODEL)
    (model_dir / LABELS).write_text("\n".join(labels) + "\n", encoding="utf-8")
    (model_dir / CONFIG).write_text(config_pbtxt(name, len(labels), max_batch_size, max_queue_delay_us),
                                    encoding="utf-8")
    return model_dir
