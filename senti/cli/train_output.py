"""What `senti train` prints when it ends: the epochs' table and the kept checkpoint against the baseline."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from senti.cli.common import console
from senti.core import layout


def print_result(metrics, output_dir: Path) -> None:
    """The epochs' table and the kept checkpoint against the baseline (`metrics`: a TrainingMetrics)."""
    table = Table(title=f"training ({metrics.device}, {metrics.precision}, {metrics.world_size} worker(s))")
    for col in ("epoch", "seconds", "samples/s", "train loss", "dev acc", "dev macro-F1"):
        table.add_column(col, justify="right")
    for e in metrics.epochs:
        table.add_row(str(e.epoch), f"{e.wall_seconds:.1f}", f"{e.train_samples_per_s:.1f}",
                      *(_figure(v) for v in (e.train_loss, e.dev_accuracy, e.dev_macro_f1)))
    console.print(table)
    best = metrics.best.dev_accuracy
    base = metrics.baseline.dev if metrics.baseline else None
    against = f", baseline {base.accuracy:.4f} ({best - base.accuracy:+.4f})" if base else ""
    console.print(f"best checkpoint: [bold]{output_dir}[/] (dev accuracy {best:.4f}{against}); "
                  f"curves: {output_dir / layout.CURVES_PNG}")


def _figure(value: float | None) -> str:  # an epoch with no evaluation (--eval-every past it) has no dev figures
    return "-" if value is None else f"{value:.4f}"
