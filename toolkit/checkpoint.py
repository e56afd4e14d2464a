"""Checkpoint folders: PaddleNLP's `save_pretrained` layout plus `senti.json`, written atomically."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from serving import layout


def write_json_atomic(path: Path, data) -> None:
    """Write JSON beside `path` and rename over it, so a reader never sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, ensure_ascii=False, indent=2)
        fh.write("\n")
    os.chmod(tmp, 0o644)  # mkstemp makes files private; artifacts are meant to be shared
    os.replace(tmp, path)


def versions() -> dict:
    import paddle
    import paddlenlp

    return {"paddle": paddle.__version__, "paddlenlp": paddlenlp.__version__}


def save_checkpoint(model, tokenizer, out_dir: Path, meta: dict) -> None:
    """Save weights, tokenizer and metadata into `out_dir` without ever leaving it half-written.

    Everything is first written to a hidden sibling folder; each file then replaces its old
    version with an atomic rename, weights last-but-one and `senti.json` last, so an
    interrupted save leaves the previous checkpoint loadable.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir, prefix=".staging-"))
    try:
        # paddle's DataParallel wraps the model; save the inner one so PaddleNLP can load it.
        inner = getattr(model, "_layers", model)
        inner.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        write_json_atomic(staging / layout.CHECKPOINT_META, {"meta_version": layout.META_VERSION, **meta})
        names = sorted(p.name for p in staging.iterdir())
        order = [n for n in names if n not in (layout.PADDLENLP_WEIGHTS, layout.CHECKPOINT_META)]
        for name in order + [layout.PADDLENLP_WEIGHTS, layout.CHECKPOINT_META]:
            if (staging / name).exists():
                os.replace(staging / name, out_dir / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
