"""senti checkpoints (PaddleNLP folders plus `senti.json`): the metadata schema and the one reader,
shared by `senti export` and the toolkit's eval, distillation and continued training."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from senti.serving import layout
from senti.serving.artifacts import ArtifactMeta, SplitRecipe, labels_problem
from senti.serving.errors import ArtifactError


@dataclass
class CheckpointMeta(ArtifactMeta):
    """`senti.json`: labels, sequence length, tokenizer, where the weights came from, how the splits were cut."""

    FILE: ClassVar[str] = layout.CHECKPOINT_META
    KIND: ClassVar[str] = "checkpoint"

    labels: list[str]
    max_seq_len: int
    meta_version: int = layout.META_VERSION
    written_by: str = "senti train"
    tokenizer: dict = field(default_factory=dict)
    model: dict = field(default_factory=dict)  # source: scratch preset, PaddleNLP name, parent checkpoint
    versions: dict = field(default_factory=dict)
    # The SplitRecipe of the data it was trained on; None in checkpoints from before senti recorded it.
    data: dict | None = None
    dev: dict | None = None  # the evaluation this checkpoint was kept for
    precision: str | None = None

    def problem(self) -> str | None:
        if self.data is not None and not (isinstance(self.data, dict) and "dataset" in self.data and
                                          "seed" in self.data):
            return "data must record dataset and seed"
        return labels_problem(self.labels, self.max_seq_len)

    @property
    def splits(self) -> SplitRecipe | None:
        """How the training data was split (dataset, seed, columns), or None when not recorded."""
        return SplitRecipe(**self.data) if self.data else None


def read_meta(path: Path) -> CheckpointMeta:
    """The checkpoint's validated `senti.json`, or a one-line error saying why `path` is not a checkpoint."""
    path = Path(path)
    if not path.is_dir():
        raise ArtifactError(f"{path}: not a folder")
    for needed in (layout.PADDLENLP_CONFIG, layout.PADDLENLP_WEIGHTS, layout.VOCAB, layout.CHECKPOINT_META):
        if not (path / needed).is_file():
            raise ArtifactError(f"{path}: not a senti checkpoint (no {needed})")
    return CheckpointMeta.read(path)


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
    if model.config.num_labels != len(meta.labels):
        raise ArtifactError(
            f"{path}: the classifier has {model.config.num_labels} outputs but {layout.CHECKPOINT_META} lists "
            f"{len(meta.labels)} labels"
        )
    model.eval()
    return model, tokenizer, meta
