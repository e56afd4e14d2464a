"""Static Paddle model to ONNX (paddle2onnx), then ONNX Runtime's optimizer, INT8 and fp16 variants."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from senti.core.errors import SentiError
from senti.export.specs import ExportSpec


class ExportError(SentiError):
    """An export step failed or produced a model that does not agree with the dynamic graph."""


@contextlib.contextmanager
def _quiet_fds():
    """paddle2onnx and polygraphy print pages of progress from C++; keep it out of the user's terminal."""
    saved = [os.dup(1), os.dup(2)]
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)
        os.dup2(devnull.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)


def paddle_to_onnx(graph_file: str, params_file: str, out: Path, spec: ExportSpec) -> dict:
    """Convert with paddle2onnx, name the output as the spec says, and check the graph is not empty."""
    import onnx
    import paddle2onnx

    with _quiet_fds():
        paddle2onnx.export(graph_file, params_file, str(out), opset_version=spec.opset,
                           enable_onnx_checker=True, auto_upgrade_opset=False)
    if not out.is_file() or out.stat().st_size == 0:
        raise ExportError(f"paddle2onnx wrote no model to {out}")
    model = onnx.load(str(out))
    _rename_output(model, spec.output_name)
    _name_dynamic_axes(model, spec)
    check_graph(model, spec, out)
    onnx.save(model, str(out))
    return describe(model)


def _rename_output(model, name: str) -> None:
    old = model.graph.output[0].name
    if old == name:
        return
    for node in model.graph.node:
        node.output[:] = [name if o == old else o for o in node.output]
        node.input[:] = [name if i == old else i for i in node.input]
    model.graph.output[0].name = name


def _name_dynamic_axes(model, spec: ExportSpec) -> None:
    """paddle2onnx names free dims DynamicDimension.N; use the spec's names, as other tools expect."""
    for value in model.graph.input:
        for dim, name in zip(value.type.tensor_type.shape.dim, spec.dynamic_axes):
            dim.dim_param = name
    batch = model.graph.output[0].type.tensor_type.shape.dim[0]
    batch.dim_param = spec.dynamic_axes[0]


def check_graph(model, spec: ExportSpec, where: Path) -> None:
    """Refuse graphs known to come out broken: no nodes or weights, or inputs not as declared."""
    import onnx

    if len(model.graph.node) == 0 or len(model.graph.initializer) == 0:
        raise ExportError(f"{where}: the ONNX graph is empty ({len(model.graph.node)} nodes, "
                          f"{len(model.graph.initializer)} weights)")
    names = sorted(i.name for i in model.graph.input)
    if names != sorted(spec.input_names):
        raise ExportError(f"{where}: inputs are {names}, expected {sorted(spec.input_names)}")
    onnx.checker.check_model(model)


def describe(model) -> dict:
    """Input/output names and shapes (symbolic dims by name) and opset, for export.json."""
    def shape(value):
        return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]

    return {
        "inputs": {i.name: shape(i) for i in model.graph.input},
        "outputs": {o.name: shape(o) for o in model.graph.output},
        "opset": max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
        "nodes": len(model.graph.node),
    }


def optimize(src: Path, out: Path, num_heads: int, hidden_size: int) -> dict:
    """ONNX Runtime's transformer optimizer for BERT-style graphs; returns the fused-operator counts.

    opt_level 0 keeps it to the pattern fusions: higher levels import torch. Attention is not
    fused on paddle2onnx graphs (Paddle builds the mask from input_ids), so the counts are recorded.
    """
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet_fds():
        optimized = optimize_model(str(src), model_type="bert", num_heads=num_heads, hidden_size=hidden_size,
                                   opt_level=0)
        optimized.save_model_to_file(str(out))
    return {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}


def quantize_int8(src: Path, out: Path) -> None:
    """Dynamic INT8 quantization of weights (activations quantized at run time): the CPU format."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with _quiet_fds():
        quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8)


def quantize_int8_static(src: Path, out: Path, batches) -> dict:
    """Static INT8 (QDQ): activation scales calibrated once (min/max) on `batches` of (input_ids, token_type_ids),
    so a text's answer never depends on its batch-mates; only MatMuls with weights are quantized (attention's
    activation-by-activation MatMuls stay fp32), which was faster and as accurate here."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    graph = onnx.load(str(src)).graph
    weights = {i.name for i in graph.initializer}
    weight_matmuls = [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]

    class Feed(CalibrationDataReader):
        def __init__(self):
            self.items = iter(batches)

        def get_next(self):
            item = next(self.items, None)
            return None if item is None else {"input_ids": item[0], "token_type_ids": item[1]}

    with _quiet_fds():
        quantize_static(str(src), str(out), Feed(), quant_format=QuantFormat.QDQ, op_types_to_quantize=["MatMul"],
                        nodes_to_quantize=weight_matmuls, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=False)
    return {"quantized_matmuls": len(weight_matmuls)}


def to_fp16(src: Path, out: Path) -> None:
    """float16 weights and compute with float32 inputs and outputs kept, for GPU providers."""
    import onnx
    from onnxruntime.transformers.onnx_model import OnnxModel

    model = OnnxModel(onnx.load(str(src)))
    model.convert_float_to_float16(keep_io_types=True)
    model.save_model_to_file(str(out))
