"""Writing checkpoint folders: PaddleNLP's `save_pretrained` layout plus `senti.json`, never half-written.

The metadata schema (`CheckpointMeta`) and the reader live in `senti.export.checkpoint`.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from senti.export.checkpoint import CheckpointMeta
from senti.serving import layout


def versions() -> dict:
    import paddle
    import paddlenlp

    return {"paddle": paddle.__version__, "paddlenlp": paddlenlp.__version__}


def save_checkpoint(model, tokenizer, out_dir: Path, meta: CheckpointMeta) -> None:
    """Save weights, tokenizer and metadata into `out_dir` without ever leaving it half-written.

    Everything is first written to a hidden sibling folder; each file then replaces its old
    version with an atomic rename, weights last-but-one and `senti.json` last, so an
    interrupted save leaves the previous checkpoint loadable.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=layout.CHECKPOINT_STAGING_PREFIX))
    try:
        # paddle's DataParallel wraps the model; save the inner one so PaddleNLP can load it.
        inner = getattr(model, "_layers", model)
        inner.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        meta.write(staging)
        names = sorted(p.name for p in staging.iterdir())
        order = [n for n in names if n not in (layout.PADDLENLP_WEIGHTS, layout.CHECKPOINT_META)]
        for name in order + [layout.PADDLENLP_WEIGHTS, layout.CHECKPOINT_META]:
            if (staging / name).exists():
                os.replace(staging / name, out_dir / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
