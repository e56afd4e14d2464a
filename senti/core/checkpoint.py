"""senti checkpoints (PaddleNLP folders plus `senti.json`): the metadata schema and the one reader,
shared by `senti export` and the toolkit's eval, distillation and continued training."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from senti.core import layout
from senti.core.artifacts import (
    ArtifactMeta,
    Calibration,
    Record,
    SplitRecipe,
    TokenizerSettings,
    labels_problem,
    scores_problem,
)
from senti.core.errors import ArtifactError


@dataclass
class ModelSource(Record):
    """Where a model's weights came from: `source` is scratch, preset (a distillation student's), pretrained,
    huggingface, checkpoint, continued (pretraining) or paddlenlp (a PaddleNLP name); the rest as that origin has."""

    source: str
    path: str | None = None  # a folder's, resolved
    name: str | None = None  # a PaddleNLP name, or a student as given
    preset: str | None = None
    shape: str | None = None  # SHAPES' name: 2l-128h...
    vocab_size: int | None = None
    ngram_buckets: int | None = None
    origin: str | None = None  # a checkpoint's first ancestor's origin (scratch, pretrained...)
    loaded: str | None = None  # what loading a pretrained folder reported (tensors matched, converted)
    init_layers: list[int] | None = None  # a student's layers copied from its teacher's


@dataclass
class EvalPoint(Record):
    """One evaluation on dev during training (the checkpoint kept is the best of them)."""

    epoch: int
    step: int
    dev_accuracy: float
    dev_macro_f1: float
    dev_log_loss: float | None = None
    seconds: float | None = None  # since the command started
    # with the n-gram head (toolkit.evaluation.evaluate.choose_ngram_weight): its weight chosen on dev, each side alone
    ngram_weight: float | None = None
    dev_accuracy_ernie: float | None = None
    dev_accuracy_ngram: float | None = None
    logit_adjustment_tau: float | None = None
    parent: bool | None = None  # the parent as loaded (a continued model's first candidate)
    old_dev_accuracy: float | None = None  # on the parent's own dev split
    blend: float | None = None  # the child's share of a parent-child blend (--interpolate)


@dataclass
class Lineage(Record):
    """A continued model's parent and the data it was continued on."""

    parent: str
    parent_version: str  # the first 12 hex digits of the parent's senti.json's SHA-256
    dataset: str
    parent_data: SplitRecipe | None = None
    replay: str | None = None
    replay_ratio: float | None = None
    replayed_rows: int = 0
    replay_notes: list[str] = field(default_factory=list)


@dataclass
class Parallel(Record):
    """The workers of the run that wrote an artifact."""

    world_size: int
    nodes: int


@dataclass
class CheckpointMeta(ArtifactMeta):
    """`senti.json`: labels, sequence length, tokenizer, where the weights came from, how the splits were cut."""

    FILE: ClassVar[str] = layout.CHECKPOINT_META
    KIND: ClassVar[str] = "checkpoint"
    NESTED: ClassVar[dict[str, Callable[[Any], Any]]] = {"tokenizer": TokenizerSettings.from_json}

    labels: list[str]
    max_seq_len: int
    meta_version: int = layout.META_VERSION
    written_by: str = "senti train"
    tokenizer: TokenizerSettings = field(default_factory=TokenizerSettings)
    model: ModelSource = field(default_factory=lambda: ModelSource("unknown"))
    versions: dict[str, str] = field(default_factory=dict)  # paddle's and each recorded distribution's
    # How the data it was trained on was split; None in checkpoints from before senti recorded it.
    data: SplitRecipe | None = None
    dev: EvalPoint | None = None  # the evaluation this checkpoint was kept for
    lineage: Lineage | None = None  # continued from: parent checkpoint (path, version), new and replayed datasets
    precision: str | None = None
    kernels: str | None = None  # the CPU training kernels that trained it and why (metrics.json's `kernels`)
    parallel: Parallel | None = None
    # fitted on dev after training (senti.core.calibration); None: the plain softmax (--no-calibrate, or too few dev)
    calibration: Calibration | None = None

    def problem(self) -> str | None:
        return labels_problem(self.labels, self.max_seq_len) or scores_problem(self.calibration, None,
                                                                                len(self.labels))


def read_meta(path: Path) -> CheckpointMeta:
    """The checkpoint's validated `senti.json`, or a one-line error saying why `path` is not a checkpoint."""
    path = Path(path)
    if not path.is_dir():
        raise ArtifactError(f"{path}: not a folder")
    for needed in (layout.PADDLENLP_CONFIG, layout.CHECKPOINT_META):
        if not (path / needed).is_file():
            raise ArtifactError(f"{path}: not a senti checkpoint (no {needed})")
    if not any((path / name).is_file() for name in (layout.VOCAB, layout.TOKENIZER_JSON)):
        raise ArtifactError(f"{path}: not a senti checkpoint (no {layout.VOCAB} or {layout.TOKENIZER_JSON})")
    if not any((path / name).is_file() for name in (layout.PADDLENLP_SAFE_WEIGHTS, layout.PADDLENLP_WEIGHTS)):
        raise ArtifactError(f"{path}: not a senti checkpoint (no {layout.PADDLENLP_SAFE_WEIGHTS})")
    return CheckpointMeta.read(path)


def check_weights_format(path: Path, trust_pickle: bool = False) -> bool:
    """True when the weights are safetensors; a pickle (`.pdparams`, which runs code when loaded) only with
    `trust_pickle`, else one clear error."""
    path = Path(path)
    if (path / layout.PADDLENLP_SAFE_WEIGHTS).is_file():
        return True
    if not trust_pickle:
        raise ArtifactError(f"{path}: its weights are a pickle ({layout.PADDLENLP_WEIGHTS}), and loading a pickle "
                            "can run any code in it; pass --trust-pickle only if you trust where it came from "
                            f"(senti's own checkpoints are {layout.PADDLENLP_SAFE_WEIGHTS}, which cannot)")
    return False


def model_config(path: Path, kind: str = "model folder") -> dict:
    """A model folder's config.json read as untrusted input (inside the folder, bounded) and its numbers range-checked
    (core.untrusted.check_model_config), before anything is built from it."""
    from senti.core.untrusted import check_model_config, read_json_file

    data = read_json_file(path, layout.PADDLENLP_CONFIG, "the model config", kind)
    where = Path(path) / layout.PADDLENLP_CONFIG
    if not isinstance(data, dict):
        raise ArtifactError(f"{where}: not a model config (not a JSON object)")
    check_model_config(data, where)
    return data


def model_files_inside(path: Path, kind: str) -> None:
    """Refuse a folder whose vocabulary, tokenizer settings or weights lead out of it (a link to /etc/passwd)."""
    from senti.core.untrusted import inside

    for name, what in ((layout.VOCAB, "the vocabulary"), (layout.TOKENIZER_JSON, "the tokenizer"),
                       (layout.PADDLENLP_TOKENIZER_CONFIG, "the tokenizer config"),
                       (layout.PADDLENLP_SAFE_WEIGHTS, "the weights"), (layout.PADDLENLP_WEIGHTS, "the weights")):
        if (Path(path) / name).is_symlink() or (Path(path) / name).exists():
            inside(path, name, what, kind)


def load_checkpoint(path: Path, trust_pickle: bool = False):
    """(model, tokenizer, meta) from a checkpoint folder, with its vocabulary checked against the weights.

    Weights load from safetensors; a pickled `.pdparams` only with `trust_pickle`.
    """
    meta = read_meta(path)
    config = model_config(path, "checkpoint folder")
    model_files_inside(path, "checkpoint folder")
    safe = check_weights_format(path, trust_pickle)
    from paddlenlp.transformers import AutoModelForSequenceClassification, AutoTokenizer

    from senti.core.json_tokenizer import JsonTokenizer, is_json_tokenizer_folder

    try:
        if isinstance(config.get("ngram_buckets"), int) and config["ngram_buckets"] > 0:
            from senti.core.ngram_head import model_class

            model = model_class().from_pretrained(str(path), use_safetensors=safe)
        else:
            model = AutoModelForSequenceClassification.from_pretrained(str(path), use_safetensors=safe)
        tokenizer = JsonTokenizer.from_folder(path, "checkpoint folder") if is_json_tokenizer_folder(path) else \
            AutoTokenizer.from_pretrained(str(path))
    except ArtifactError:
        raise
    except Exception as err:  # PaddleNLP raises assorted types for broken folders
        raise ArtifactError(f"{path}: could not load checkpoint ({type(err).__name__}: {err})") from None
    rows = model.base_model.embeddings.word_embeddings.weight.shape[0]
    if len(tokenizer.vocab) != rows:
        raise ArtifactError(
            f"{path}: {getattr(tokenizer, 'senti_vocab_file', layout.VOCAB)} has {len(tokenizer.vocab)} tokens but the "
            f"embeddings have {rows} rows"
        )
    if model.config.num_labels != len(meta.labels):
        raise ArtifactError(
            f"{path}: the classifier has {model.config.num_labels} outputs but {layout.CHECKPOINT_META} lists "
            f"{len(meta.labels)} labels"
        )
    model.eval()
    return model, tokenizer, meta
