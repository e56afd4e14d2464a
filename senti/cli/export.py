"""`senti export`: a checkpoint to Paddle Inference and ONNX variants, each proven against the dynamic graph."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from senti.cli.common import TRUST_PICKLE_HELP, choices, console, quiet, say, sigterm_unwinds, user_errors
from senti.export.pipeline import EXPORT_FORMATS, QUANTIZE_CHOICES

app = typer.Typer()
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Quantize = Any
else:
    Quantize = choices("Quantize", QUANTIZE_CHOICES)


@app.command("export")
def export_cmd(
    model: Annotated[Path, typer.Option(help="Checkpoint folder written by senti train.")],
    output_dir: Annotated[Path, typer.Option(help="Export folder to create.")],
    formats: Annotated[str, typer.Option(help=f"Comma-separated, of: {', '.join(EXPORT_FORMATS)} (Paddle "
                                              "Inference, ONNX).")] = ",".join(EXPORT_FORMATS),
    quantize: Annotated[Optional[Quantize], typer.Option(
        help="Also write INT8 models: static (scales calibrated on training texts) and dynamic.")] = None,
    fp16: Annotated[bool, typer.Option(help="Also write a float16 ONNX model for GPU providers.")] = False,
    opset: Annotated[int, typer.Option(help="ONNX opset.")] = 14,
    max_seq_len: Annotated[Optional[int], typer.Option(help="Longest input (default: the checkpoint's).")] = None,
    dataset: Annotated[Optional[str], typer.Option(
        help="Texts for the parity check: its dev split (default: the data the model was trained on, cut the "
             "same way).")] = None,
    parity_samples: Annotated[int, typer.Option(help="Dev texts used for the parity check (at most).", min=2)] = 1000,
    overwrite: Annotated[bool, typer.Option(help="Replace an existing export folder.")] = False,
    triton_name: Annotated[str, typer.Option(help="Model name in the Triton repository.")] = "senti",
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).", min=1)] = None,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
    calibrate: Annotated[bool, typer.Option(help="Answer with the checkpoint's calibrated probabilities (senti.json's "
                                                 "temperature); --no-calibrate: the plain softmax.")] = True,
    abstain: Annotated[Optional[str], typer.Option(
        help="precision=P or coverage=C: choose on the whole dev split the score below which every runtime marks "
             "an answer unsure (the label still given), for that precision of the rest or that share answered.")]
        = None,
):
    """Static graph, Paddle Inference and ONNX (optimized, INT8, fp16), each proven against the dynamic graph."""
    quiet(threads)
    from senti.export.pipeline import ExportConfig
    from senti.toolkit.training.exporting import export_checkpoint

    with user_errors(), sigterm_unwinds():
        config = ExportConfig(model=str(model), output_dir=str(output_dir), quantize=quantize and quantize.value,
                              formats=tuple(f.strip() for f in formats.split(",") if f.strip()), fp16=fp16,
                              opset=opset, max_seq_len=max_seq_len, overwrite=overwrite, triton_name=triton_name,
                              threads=threads, trust_pickle=trust_pickle, calibrate=calibrate, abstain=abstain)
        record = export_checkpoint(config, dataset, parity_samples, say=say)
    table = Table(title=f"export parity on {record.parity_texts} dev texts (reference accuracy "
                        f"{record.reference_accuracy or 0:.4f})")
    for col in ("format", "max |logit diff|", "alone vs batch", "label agreement", "accuracy", "fit"):
        table.add_column(col, justify="right")
    for fmt, entry in record.formats.items():
        p = entry.parity
        table.add_row(fmt, _figure(p.max_abs_logit_diff, ".2e"), _figure(p.max_batch_dependence, ".1e"),
                      _figure(p.label_agreement, ".4f"), _figure(p.accuracy, ".4f"),
                      {True: "yes", False: "NO", None: "unverified"}[p.fit])
    console.print(table)
    console.print(f"export: [bold]{output_dir}[/] ({', '.join(record.formats)}; Triton repository: "
                  f"{record.triton or 'none'})")
    c = record.calibration
    console.print(f"scores: calibrated (temperature {c.temperature:.3f}, fitted on {c.texts} dev texts)" if c else
                  "scores: the plain softmax (no calibration recorded or --no-calibrate)", markup=False)


def _figure(value: float | None, spec: str) -> str:
    return format(float("nan") if value is None else value, spec)
