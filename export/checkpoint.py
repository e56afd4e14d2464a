"""Reading senti checkpoints (PaddleNLP folders plus `senti.json`): the one reader, shared by
`senti export` and the toolkit's eval, distillation and continued training."""

from __future__ import annotations

import json
from pathlib import Path

from serving import layout
from serving.errors import ArtifactError


def read_meta(path: Path) -> dict:
    """The checkpoint's `senti.json`, or a one-line error saying why `path` is not a checkpoint."""
    path = Path(path)
    if not path.is_dir():
        raise ArtifactError(f"{path}: not a folder")
    for needed in (layout.PADDLENLP_CONFIG, layout.PADDLENLP_WEIGHTS, layout.VOCAB, layout.CHECKPOINT_META):
        if not (path / needed).is_file():
            raise ArtifactError(f"{path}: not a senti checkpoint (no {needed})")
    meta_file = path / layout.CHECKPOINT_META
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        if not isinstance(meta["labels"], list) or not isinstance(meta["max_seq_len"], int):
            raise TypeError("labels must be a list and max_seq_len an integer")
    except (json.JSONDecodeError, KeyError, TypeError) as err:
        raise ArtifactError(f"{meta_file}: unreadable checkpoint metadata ({err})") from None
    return meta


def load_checkpoint(path: Path):
    """(model, tokenizer, meta) from a checkpoint folder, with its vocabulary checked against the weights.

    Loads `.pdparams` (a pickle) only from a folder the user named.
    """
    meta = read_meta(path)
    from paddlenlp.transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(path))
        tokenizer = AutoTokenizer.from_pretrained(str(path))
    except Exception as err:  # PaddleNLP raises assorted types for broken folders
        raise ArtifactError(f"{path}: could not load checkpoint ({type(err).__name__}: {err})") from None
    rows = model.base_model.embeddings.word_embeddings.weight.shape[0]
    if len(tokenizer.vocab) != rows:
        raise ArtifactError(
            f"{path}: vocab.txt has {len(tokenizer.vocab)} tokens but the embeddings have {rows} rows"
        )
    if model.config.num_labels != len(meta["labels"]):
        raise ArtifactError(
            f"{path}: the classifier has {model.config.num_labels} outputs but senti.json lists "
            f"{len(meta['labels'])} labels"
        )
    model.eval()
    return model, tokenizer, meta
