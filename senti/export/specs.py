"""What an export must look like, declared once: input and output names, dynamic axes, opset, tolerances."""

from __future__ import annotations

from dataclasses import dataclass

from senti.core import layout


@dataclass(frozen=True)
class ExportSpec:
    input_names: tuple[str, ...] = layout.INPUT_NAMES
    input_dtype: str = "int64"
    # Every input is [batch, sequence]: any batch size, any length up to the model's limit.
    dynamic_axes: tuple[str, ...] = ("batch", "sequence")
    output_name: str = layout.OUTPUT_NAME
    opset: int = 14  # tolerances are per format, in senti.serving.backends.FORMATS


ERNIE_SEQUENCE_CLASSIFICATION = ExportSpec()
