"""The toolkit's own artifacts, each a schema on the validating base (`senti.core.artifacts.ArtifactMeta`):
`metrics.json` of a training or distillation run (`TrainingMetrics`) and of pretraining (`PretrainMetrics`),
`distill.json` (`DistillReport`) and `eval_<split>.json` (`EvalRecord`). The run fills the schema as it goes and
writes it through `write` (atomic); readers get one clear error for a file that is not one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, known_fields, write_json_atomic


@dataclass
class BlendTried:
    """One parent-child blend of `senti train --interpolate` (toolkit.training.blend), as judged on dev."""

    share: float  # the child's share of the blend
    passes: bool  # beat the parent on the new dev labels and stayed within the margin on its own dev
    dev_accuracy: float
    dev_log_loss: float
    old_dev_accuracy: float | None = None  # on the parent's own dev split, when that can be read

    @classmethod
    def from_json(cls, data) -> BlendTried:
        if not isinstance(data, dict):
            raise ValueError("each blend must be an object")
        return cls(**known_fields(cls, data))


@dataclass
class TrainingMetrics(ArtifactMeta):
    """`metrics.json` of `senti train` and `senti distill`: the run's settings as resolved, every step's loss, each
    epoch and evaluation, the best one (the saved checkpoint), and how the run ended."""

    FILE: ClassVar[str] = layout.METRICS
    KIND: ClassVar[str] = "training metrics"
    NESTED: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "blends": lambda blends: [BlendTried.from_json(b) for b in _records(blends, "blends")]}

    written_by: str
    model: dict  # where the weights came from (preset, PaddleNLP name, folder)
    device: str
    precision: str
    versions: dict
    runtime: dict
    data: dict  # rows per split, truncation, extra texts
    meta_version: int = layout.META_VERSION
    world_size: int = 1
    nodes: int = 1
    amp_requested: bool = False
    baseline: dict | None = None  # the char n-gram logistic regression on the same splits (train)
    passed_baseline: dict | None = None  # {step, seconds since the command started}: dev first above the baseline
    epochs: list[dict] = field(default_factory=list)
    evaluations: list[dict] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    step_terms: list[dict] = field(default_factory=list)  # distillation: each loss term per step
    best: dict | None = None
    interrupted: dict | None = None  # {signal, epoch, step} when a signal stopped the run
    stopped_early: bool = False
    workers: list[dict] | None = None  # per rank (several workers): node, steps, weights digest
    kernels: str | None = None  # the CPU training kernels that ran and why: "c (library)", "python (reason)"
    kept_parent: bool = False  # a continued model: no checkpoint beat the parent, whose weights were kept
    # a continued model: the parent's and the kept model's accuracy on the new dev labels and the parent's dev split,
    # each with its 95% interval (toolkit.training.run.accuracy_interval)
    parent_comparison: dict | None = None
    # `--interpolate`: each parent-child blend tried
    blends: list[BlendTried] | None = None


@dataclass
class PretrainMetrics(ArtifactMeta):
    """`metrics.json` of `senti pretrain`: every step's MLM loss and tokens/s, the held-out figures at each save."""

    FILE: ClassVar[str] = layout.METRICS
    KIND: ClassVar[str] = "pretraining metrics"

    written_by: str
    model: dict
    corpus: dict  # sources with row counts and hashes, tokens, sequences, [UNK] rate
    runtime: dict
    versions: dict
    meta_version: int = layout.META_VERSION
    world_size: int = 1
    nodes: int = 1
    steps: list[dict] = field(default_factory=list)  # {step, loss, tokens_per_s}, earlier runs' too when resumed
    evaluations: list[dict] = field(default_factory=list)  # {step, mlm_loss, masked_accuracy, ...}
    resumed_at: int = 0  # the step this run started at (0: from the start)
    interrupted: dict | None = None
    workers: list[dict] | None = None
    precision: str = "fp32"  # fp32, or bf16 with --amp on a CPU that can (toolkit.training.run.resolve_precision)
    kernels: str | None = None  # the CPU training kernels that ran and why (as TrainingMetrics.kernels)


@dataclass
class DistillReport(ArtifactMeta):
    """`distill.json`: teacher against student (parameters, size, dev and, when scored, test figures)."""

    FILE: ClassVar[str] = layout.DISTILL_META
    KIND: ClassVar[str] = "distillation report"

    settings: dict  # the DistillConfig as run
    teacher: dict
    student: dict
    meta_version: int = layout.META_VERSION
    extra_texts: dict | None = None  # the teacher-labelled texts beside the training split


@dataclass
class DomainReport(ArtifactMeta):
    """`eval_domains_<split>.json` (`layout.eval_domains`): one model scored on several domains, each an entry of
    `domains` shaped as `EvalRecord`'s figures, with the baseline (fitted once on the model's training split)."""

    FILE: ClassVar[str] = layout.eval_domains("<split>")
    KIND: ClassVar[str] = "domain evaluation"

    model: str
    backend: str
    split: str
    datasets: list[str]
    domains: dict[str, dict]
    group_by: str | None = None
    meta_version: int = layout.META_VERSION

    def write_to(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())


@dataclass
class EvalRecord(ArtifactMeta):
    """`eval_<split>.json` (`layout.eval_results`): one model scored on one split, or every labelled row of a file,
    with the n-gram baseline on the same texts."""

    FILE: ClassVar[str] = layout.eval_results("<split>")  # one per split: written with `write_to`
    KIND: ClassVar[str] = "evaluation"

    model: str
    backend: str
    dataset: str
    split: str
    labels: list[str]
    n: int
    accuracy: float
    macro_f1: float
    per_class_precision: dict[str, float]
    per_class_recall: dict[str, float]
    per_class_f1: dict[str, float]
    support: dict[str, int]
    confusion_matrix: list[list[int]]  # rows: true label, columns: predicted
    meta_version: int = layout.META_VERSION
    data: dict = field(default_factory=dict)  # how the split was cut (dataset, seed, columns)
    truncated_texts: int = 0
    baseline: dict | None = None
    # texts the model was trained on among those scored, accuracy on them and on the rest (toolkit.seen)
    seen_in_training: dict | None = None

    def write_to(self, path: Path) -> None:
        write_json_atomic(path, self.to_json())


def _records(value, name: str) -> list:
    if not isinstance(value, list):
        raise ValueError(f"{name} must be a list")
    return value
