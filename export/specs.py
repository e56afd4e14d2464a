"""What an export must look like, declared once: input and output names, dynamic axes, opset, tolerances."""

from __future__ import annotations

from dataclasses import dataclass

from serving import layout


@dataclass(frozen=True)
class ExportSpec:
    input_names: tuple[str, ...] = layout.INPUT_NAMES
    input_dtype: str = "int64"
    # Every input is [batch, sequence]: any batch size, any length up to the model's limit.
    dynamic_axes: tuple[str, ...] = ("batch", "sequence")
    output_name: str = layout.OUTPUT_NAME
    opset: int = 14
    fp32_atol: float = 1e-4  # max |logit difference| allowed for fp32 formats
    fp16_atol: float = 5e-2
    int8_max_accuracy_drop: float = 0.01  # beyond this an INT8 model is marked unfit


ERNIE_SEQUENCE_CLASSIFICATION = ExportSpec()
