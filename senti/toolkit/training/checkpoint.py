"""Writing checkpoint folders: PaddleNLP's `save_pretrained` layout plus `senti.json`, never half-written.

The metadata schema (`CheckpointMeta`) and the reader live in `senti.core.checkpoint`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, SplitRecipe, TokenizerSettings, remove_stale_work
from senti.core.checkpoint import CheckpointMeta, Lineage, ModelSource
from senti.core.errors import SentiError


def versions() -> dict[str, str]:
    """What a training artifact records: the paddle module's version (CPU and GPU builds alike) and every
    recorded distribution's."""
    import paddle

    from senti.core.runtime import package_versions

    return {"paddle": paddle.__version__, **package_versions()}


def refuse_existing(out_dir: Path, overwrite: bool) -> None:
    """A folder that already holds a checkpoint, or files that are not a senti run's (`layout.RUN_FILES`, hidden
    work files, evaluation records), is written into only when the user says so: a run writes config.json,
    vocab.txt and more, and would replace a user's files of those names."""
    out = Path(out_dir)
    if overwrite or not out.is_dir():
        return
    if (out / layout.CHECKPOINT_META).is_file():
        raise SentiError(f"{out_dir} already holds a checkpoint; pass --overwrite to replace it (nothing is written "
                         "over it until the new checkpoint is saved)")
    foreign = sorted(p.name for p in out.iterdir() if not p.name.startswith(".") and not (
        p.name in layout.RUN_FILES and _senti_wrote(p)) and not (p.name.startswith("eval_") and p.suffix == ".json"))
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise SentiError(f"{out_dir} is not empty and not a senti run's folder ({shown}); a run would write over "
                         "files of those names: choose a new or empty folder, or pass --overwrite")


def _senti_wrote(path: Path) -> bool:
    """Whether a file named as a run's is a run's: its JSON records say who wrote them (metrics) or hold a run's
    settings (configs); a user's own metrics.json is not senti's to replace. Other run files are taken by name."""
    if path.suffix != ".json":
        return True
    import json

    try:
        if path.stat().st_size > 16 << 20:
            return False
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and (str(record.get("written_by", "")).startswith("senti ")  # metrics
                                         or {"output_dir", "epochs", "seed"} <= set(record)  # a run's settings
                                         or {"settings", "teacher", "student"} <= set(record))  # distill.json


def save_checkpoint(model, tokenizer, out_dir: Path, meta: ArtifactMeta, config=None, extra=None) -> None:
    """Save weights, tokenizer, metadata (and the run's `config`) into `out_dir` without leaving it half-written.

    Everything is first written to a hidden sibling folder; each file then replaces its old
    version with an atomic rename, weights, then the settings, then `senti.json` last, so an
    interrupted save leaves the previous checkpoint loadable, and the settings file never describes
    weights that were not saved. `extra` maps more file names to writers `fn(path)` (a resume state).
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    remove_stale_work(out_dir, "checkpoint", "staging")
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=layout.work_prefix("checkpoint", "staging")))
    try:
        # paddle's DataParallel wraps the model; save the inner one so PaddleNLP can load it.
        inner = getattr(model, "_layers", model)
        inner.save_pretrained(str(staging), safe_serialization=True)  # safetensors: loading runs no code
        tokenizer.save_pretrained(str(staging))
        meta.write(staging)
        for name, writer in (extra or {}).items():
            writer(staging / name)
        last = [layout.PADDLENLP_SAFE_WEIGHTS, layout.CHECKPOINT_META]
        if config is not None:
            config.save(staging)
            last.insert(1, config.FILE)
        names = sorted(p.name for p in staging.iterdir())
        order = [n for n in names if n not in last]
        for name in order + last:
            if (staging / name).exists():
                os.replace(staging / name, out_dir / name)
        # A pickle beside the new weights (a checkpoint of an older senti, overwritten) would describe old weights.
        (out_dir / layout.PADDLENLP_WEIGHTS).unlink(missing_ok=True)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def checkpoint_meta(written_by: str, labels, max_seq_len: int, tokenizer, source: ModelSource,
                    versions: dict[str, str], recipe: SplitRecipe | None, lineage: Lineage | None = None) -> CheckpointMeta:
    """A checkpoint's senti.json (the dev record is added at each save); `recipe`: how its data was split;
    `lineage`: the parent checkpoint and the datasets it was continued on."""
    return CheckpointMeta(
        written_by=written_by, labels=list(labels), max_seq_len=max_seq_len,
        tokenizer=TokenizerSettings.of(tokenizer),
        model=source, versions=versions, data=recipe, lineage=lineage,
    )
