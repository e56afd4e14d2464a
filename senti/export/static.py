"""Dynamic graph to static graph: `paddle.jit.to_static` with named InputSpecs, saved for Paddle Inference."""

from __future__ import annotations

from pathlib import Path

from senti.core import layout
from senti.export.specs import ExportSpec


def save_static(model, folder: Path, spec: ExportSpec) -> tuple[str, str]:
    """Trace `model` (weights already loaded) and save it; returns (graph file, params file).

    Paddle 3 writes a PIR `inference.json`, Paddle 2.x an `inference.pdmodel`; readers accept both.
    """
    import paddle
    from paddle.static import InputSpec

    model.eval()
    # paddle's stubs leave out dtype names, which InputSpec takes
    specs = [InputSpec(shape=[None, None], dtype=spec.input_dtype, name=n)  # type: ignore[arg-type]
             for n in spec.input_names]
    static = paddle.jit.to_static(model, input_spec=specs, full_graph=True)
    folder.mkdir(parents=True, exist_ok=True)
    paddle.jit.save(static, str(folder / layout.PADDLE_PREFIX))
    return layout.paddle_model_files(folder)
