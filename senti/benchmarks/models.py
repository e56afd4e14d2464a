"""Models to benchmark: a named ERNIE shape with random weights, or an existing checkpoint, exported once."""

from __future__ import annotations

from pathlib import Path

from senti.core import layout
from senti.toolkit.training.models import SHAPES


def random_checkpoint(shape: str, out: Path, texts: list[str], labels: list[str], max_seq_len: int = 128) -> Path:
    """A checkpoint of `shape` with random weights and a character vocabulary from `texts`.

    Speed does not depend on the weights, so benchmarks of shapes need no training; accuracy
    figures beside them are then chance level, and the report says so.
    """
    from senti.core.checkpoint import read_meta
    from senti.toolkit.training.checkpoint import checkpoint_meta, save_checkpoint, versions
    from senti.toolkit.training.models import build_model

    if (out / layout.CHECKPOINT_META).is_file():
        read_meta(out)
        return out
    model, tokenizer, source = build_model(f"scratch:{shape}", labels, texts, max_seq_len)
    meta = checkpoint_meta("senti bench (random weights)", labels, max_seq_len, tokenizer, source, versions(), None)
    save_checkpoint(model, tokenizer, out, meta)
    return out


STUDENT_SHAPE = "3l-128h"  # the shape a team deploys after distillation, measured beside the bench's model


def student_export(ctx) -> Path:
    """The export of a random-weight 3l-128h student beside the bench's model (built once per output folder)."""
    train = ctx.splits.train
    return resolve_model(STUDENT_SHAPE, ctx.out / "models", [e.text for e in train], ctx.splits.labels,
                         [e.label for e in train], say=ctx.say)[1]


def resolve_model(spec: str, work: Path, texts: list[str], labels: list[str], gold: list[str],
                  quantize: bool = True, say=print, parity_texts: int = 256) -> tuple[Path, Path, bool]:
    """(checkpoint, export folder, trained?) for a shape name or a checkpoint folder."""
    from senti.export.pipeline import ExportConfig, export_model

    trained = spec not in SHAPES
    checkpoint = Path(spec) if trained else random_checkpoint(spec, work / f"{spec}-checkpoint", texts, labels)
    export_dir = work / f"{checkpoint.name}-export"
    meta = export_dir / layout.EXPORT_META
    # Re-export when the checkpoint was written after the export (a rerun of training, say).
    if not meta.is_file() or meta.stat().st_mtime < (checkpoint / layout.CHECKPOINT_META).stat().st_mtime:
        say(f"exporting {checkpoint} for the benchmark")
        config = ExportConfig(model=str(checkpoint), output_dir=str(export_dir), quantize="int8" if quantize else None,
                              overwrite=True)
        export_model(config, texts[:parity_texts], gold[:parity_texts], say=lambda _: None)
    return checkpoint, export_dir, trained
