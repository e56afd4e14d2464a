"""The toolkit's own artifacts, each a schema on the validating base (`senti.core.artifacts.ArtifactMeta`):
`metrics.json` of a training or distillation run (`TrainingMetrics`) and of pretraining (`PretrainMetrics`),
`distill.json` (`DistillReport`) and `eval_<split>.json` (`EvalRecord`). The run fills the schema as it goes and
writes it through `write` (atomic); readers get one clear error for a file that is not one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, CalibrationFigures, Record, Setting
from senti.core.checkpoint import EvalPoint, ModelSource
from senti.core.runtime import RuntimeRecord


@dataclass
class Score(Record):
    """Accuracy and macro-F1 on a set of texts (and, for an evaluation, how well its probabilities are calibrated)."""

    accuracy: float
    macro_f1: float
    n: int | None = None
    calibration: CalibrationFigures | None = None


@dataclass
class AbstainFigures(Record):
    """An export's abstention threshold on the texts scored: the share it answered and how often those were right."""

    threshold: float
    target: str
    coverage: float
    precision: float
    unsure: int


@dataclass
class ScoreCalibration(Record):
    """A model's probabilities on the texts scored: as the plain softmax (`raw`) and with the model's calibration
    (`calibrated`, None for a model without one), and its abstention threshold's figures when it has one."""

    raw: CalibrationFigures
    calibrated: CalibrationFigures | None = None
    temperature: float | None = None
    abstain: AbstainFigures | None = None


@dataclass
class BaselineFigures(Record):
    """The char n-gram logistic regression fitted on the same training rows (toolkit.evaluation.baseline), scored on
    dev (training) or on the texts scored (evaluation); `skipped` says why it was not fitted."""

    model: str | None = None  # its description
    fit_seconds: float | None = None
    train_rows: int | None = None
    skipped: str | None = None
    dev: Score | None = None
    scored: Score | None = None


@dataclass
class PassedBaseline(Record):
    """When dev accuracy first rose above the baseline's: the step and the seconds since the command started."""

    step: int
    seconds: float


@dataclass
class EpochRecord(Record):
    """One epoch of a classifier run: its pace, mean loss and the last evaluation's dev figures."""

    epoch: int
    steps: int
    wall_seconds: float
    train_samples_per_s: float
    train_tokens_per_s: float
    train_loss: float | None
    dev_accuracy: float | None
    dev_macro_f1: float | None


@dataclass
class Interrupted(Record):
    """The signal that stopped a run, and where."""

    signal: str
    step: int
    epoch: int | None = None


@dataclass
class WorkerCensus(Record):
    """One worker of a data-parallel run at its end (toolkit.training.collective.census)."""

    rank: int
    node: int
    steps: int
    weights_sha256: str


@dataclass
class Interval(Record):
    """An accuracy with the half-width of its 95% interval (toolkit.training.run.accuracy_interval)."""

    accuracy: float
    interval: float


@dataclass
class ParentAgainstKept(Record):
    """A continued model's parent and kept model on one dev set of `texts` texts."""

    texts: int
    parent: Interval
    kept: Interval


@dataclass
class NgramFit(Record):
    """`--ngram-init fit`: the n-gram table fitted by logistic regression before ERNIE trains (a continued
    checkpoint's on the old data's rows, the new ones and the pool as the parent answered it)."""

    C: float
    seconds: float
    dev_accuracy: float | None = None  # a new model's fitted side alone on dev
    rows: int | None = None
    buckets_changed: int | None = None
    old_rows: int | None = None
    new_rows: int | None = None
    pool_rows: int | None = None


@dataclass
class ExtraTexts(Record):
    """Texts read beside the training split (a distillation's teacher-labelled texts, an unlabelled pool)."""

    source: str | None
    texts: int | None = None
    read: int | None = None
    used: int | None = None
    excluded_dev_test_or_duplicate: int | None = None


@dataclass
class PoolUse(ExtraTexts):
    """`--unlabeled`: the pool's texts read (as ExtraTexts), those the parent scored and those it labelled confidently
    enough to learn from."""

    scored: int = 0
    kept: int = 0
    confidence: float | None = None
    per_label: dict[str, int] | None = None


@dataclass
class PretrainStep(Record):
    """One pretraining step: its MLM loss and the tokens per second so far in this run."""

    step: int
    loss: float
    tokens_per_s: float


@dataclass
class HeldoutFigures(Record):
    """Masked-LM figures on the held-out sequences, masked the same way every time (at `step`, in metrics.json)."""

    mlm_loss: float
    masked_accuracy: float
    masked_tokens: int
    step: int | None = None


@dataclass
class CorpusSource(Record):
    """One corpus file or folder of a pretraining run."""

    corpus: str
    texts: int
    sha256: str
    excluded_dev_test_texts: int = 0


@dataclass
class CorpusStats(Record):
    """A pretraining corpus as tokenized (toolkit.data.corpus)."""

    corpora: list[CorpusSource]
    texts: int
    sequences: int
    tokens: int
    unk_rate: float
    fingerprint: str
    unk_tokens: int | None = None


@dataclass
class DataStats(Record):
    """The data a classifier run learned from: rows per split and label, what was skipped, replayed or cut."""

    origin: str
    labels: list[str]
    rows: dict[str, int]
    skipped_empty_texts: dict[str, int]
    repeats_removed: dict[str, int]
    label_counts: dict[str, dict[str, int]]
    rare_labels: dict[str, int]
    truncated_texts: dict[str, int]  # per split
    replayed_rows: int | None = None
    unlabeled: PoolUse | None = None
    ngram_fit: NgramFit | None = None
    max_seq_len: int | None = None
    pretraining_overlap: dict[str, int] | None = None  # dev and test texts the pretrained folder's corpus held
    extra_texts: ExtraTexts | None = None


@dataclass
class BlendTried(Record):
    """One parent-child blend of `senti train --interpolate` (toolkit.training.blend), as judged on dev."""

    share: float  # the child's share of the blend
    passes: bool  # beat the parent on the new dev labels and stayed within the margin on its own dev
    dev_accuracy: float
    dev_log_loss: float
    old_dev_accuracy: float | None = None  # on the parent's own dev split, when that can be read


@dataclass
class TrainingMetrics(ArtifactMeta):
    """`metrics.json` of `senti train` and `senti distill`: the run's settings as resolved, every step's loss, each
    epoch and evaluation, the best one (the saved checkpoint), and how the run ended."""

    FILE: ClassVar[str] = layout.METRICS
    KIND: ClassVar[str] = "training metrics"

    written_by: str
    model: ModelSource  # where the weights came from (preset, PaddleNLP name, folder)
    device: str
    precision: str
    versions: dict[str, str]
    runtime: RuntimeRecord
    data: DataStats  # rows per split, truncation, extra texts
    meta_version: int = layout.META_VERSION
    world_size: int = 1
    nodes: int = 1
    amp_requested: bool = False
    baseline: BaselineFigures | None = None  # the char n-gram logistic regression on the same splits (train)
    passed_baseline: PassedBaseline | None = None  # dev first above the baseline
    epochs: list[EpochRecord] = field(default_factory=list)
    evaluations: list[EvalPoint] = field(default_factory=list)
    step_losses: list[float] = field(default_factory=list)
    step_terms: list[dict[str, float]] = field(default_factory=list)  # distillation: each loss term per step
    best: EvalPoint | None = None
    interrupted: Interrupted | None = None  # when a signal stopped the run
    stopped_early: bool = False
    workers: list[WorkerCensus] | None = None  # per rank (several workers)
    kernels: str | None = None  # the CPU training kernels that ran and why: "c (library)", "python (reason)"
    kept_parent: bool = False  # a continued model: no checkpoint beat the parent, whose weights were kept
    # a continued model: the parent's and the kept model's accuracy on the new dev labels and the parent's dev split,
    # each with its 95% interval (toolkit.training.run.accuracy_interval)
    parent_comparison: dict[str, ParentAgainstKept] | None = None
    # `--interpolate`: each parent-child blend tried
    blends: list[BlendTried] | None = None


@dataclass
class PretrainMetrics(ArtifactMeta):
    """`metrics.json` of `senti pretrain`: every step's MLM loss and tokens/s, the held-out figures at each save."""

    FILE: ClassVar[str] = layout.METRICS
    KIND: ClassVar[str] = "pretraining metrics"

    written_by: str
    model: ModelSource
    corpus: CorpusStats  # sources with row counts and hashes, tokens, sequences, [UNK] rate
    runtime: RuntimeRecord
    versions: dict[str, str]
    meta_version: int = layout.META_VERSION
    world_size: int = 1
    nodes: int = 1
    steps: list[PretrainStep] = field(default_factory=list)  # earlier runs' too when resumed
    evaluations: list[HeldoutFigures] = field(default_factory=list)
    resumed_at: int = 0  # the step this run started at (0: from the start)
    interrupted: Interrupted | None = None
    workers: list[WorkerCensus] | None = None
    precision: str = "fp32"  # fp32, or bf16 with --amp on a CPU that can (toolkit.training.run.resolve_precision)
    kernels: str | None = None  # the CPU training kernels that ran and why (as TrainingMetrics.kernels)


@dataclass
class DistillSide(Record):
    """Teacher or student in distill.json: size and figures (test when the data has a test split)."""

    dev_accuracy: float
    dev_macro_f1: float
    parameters: int
    size_mb: float
    path: str | None = None  # the teacher's folder
    model: ModelSource | None = None  # where the student's weights came from
    kept_of_teacher_accuracy: float | None = None  # the student's dev accuracy over the teacher's
    test_accuracy: float | None = None
    test_macro_f1: float | None = None


@dataclass
class DistillReport(ArtifactMeta):
    """`distill.json`: teacher against student (parameters, size, dev and, when scored, test figures)."""

    FILE: ClassVar[str] = layout.DISTILL_META
    KIND: ClassVar[str] = "distillation report"

    settings: dict[str, Setting]  # the DistillConfig as run
    teacher: DistillSide
    student: DistillSide
    meta_version: int = layout.META_VERSION
    extra_texts: ExtraTexts | None = None  # the teacher-labelled texts beside the training split


@dataclass
class SeenFigures(Record):
    """How many scored texts the model was trained on, and its accuracy on those and on the rest
    (toolkit.data.seen)."""

    texts: int
    unseen_texts: int
    accuracy_seen: float | None
    accuracy_unseen: float | None


@dataclass
class ScoredData(Record):
    """What an evaluation scored: a split cut as the model's recipe says (or with a seed), or every row."""

    dataset: str
    split: str | None = None
    seed: int | None = None
    text_column: str | None = None
    label_column: str | None = None
    fingerprint: str | None = None


@dataclass
class PairFigures(Record):
    """Aspect answers scored over labelled (text, aspect) pairs: 4-way accuracy and macro-F1, mention F1."""

    pairs: int
    accuracy: float
    macro_f1: float
    mention_f1: float


@dataclass(kw_only=True)
class SplitScored(ArtifactMeta):
    """What every `eval_<split>.json` (`layout.eval_results`) says first: the model scored, the runtime that scored
    it, the data and the split."""

    FILE: ClassVar[str] = layout.eval_results("<split>")  # one per split: written with `write_to`

    model: str
    backend: str
    dataset: str
    split: str
    meta_version: int = layout.META_VERSION


@dataclass(kw_only=True)
class AspectEvalRecord(SplitScored):
    """`eval_<split>.json` of a model with aspect heads (`senti train --aspects`): its answers on one split of its
    aspect data, over every labelled pair and per aspect."""

    KIND: ClassVar[str] = "aspect evaluation"

    texts: int
    figures: PairFigures
    per_aspect: dict[str, PairFigures]


@dataclass
class ScoredFigures:
    """A model's figures on a set of texts, the baseline's beside them and the texts it had seen: the body of
    `eval_<split>.json` (EvalRecord) and of each domain of `eval_domains_<split>.json` (DomainFigures)."""

    labels: list[str]
    n: int
    accuracy: float
    macro_f1: float
    per_class_precision: dict[str, float]
    per_class_recall: dict[str, float]
    per_class_f1: dict[str, float]
    support: dict[str, int]
    confusion_matrix: list[list[int]]  # rows: true label, columns: predicted
    truncated_texts: int = 0
    # texts the model was trained on among those scored, accuracy on them and on the rest
    seen_in_training: SeenFigures | None = None
    baseline: BaselineFigures | None = None
    calibration: ScoreCalibration | None = None


@dataclass
class DomainFigures(Record, ScoredFigures):
    """One domain of `eval_domains_<split>.json`: the model's figures on it, the baseline's, the texts seen."""


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
    domains: dict[str, DomainFigures]
    group_by: str | None = None
    meta_version: int = layout.META_VERSION


@dataclass(kw_only=True)
class EvalRecord(SplitScored, ScoredFigures):
    """`eval_<split>.json`: one model scored on one split, or every labelled row of a file, with the n-gram
    baseline on the same texts."""

    KIND: ClassVar[str] = "evaluation"

    data: ScoredData | None = None  # how the split was cut (dataset, seed, columns)


@dataclass
class ClassNoise(Record):
    """One label's rows in an audit: how many were given it, its self-confidence threshold, the share the joint
    estimates wrong, and how many of them are suspects."""

    given: int
    threshold: float
    noise: float
    suspects: int


@dataclass
class AuditReport(ArtifactMeta):
    """`audit.json` of `senti audit`: where the out-of-fold probabilities came from, the confident joint (given
    label by row, confident true label by column, in `labels` order) and the noise it estimates."""

    FILE: ClassVar[str] = layout.AUDIT_REPORT
    KIND: ClassVar[str] = "label audit"

    dataset: str
    split: str
    source: str  # ngram, vectors, model or both (toolkit.evaluation.audit.SOURCES)
    labels: list[str]
    rows: int
    folds: int | None  # None for `model`: its probabilities are not refitted
    seed: int
    out_of_fold_accuracy: float  # how often the probabilities' likeliest label is the given one
    confident_joint: list[list[int]]
    per_class: dict[str, ClassNoise]
    noise_count: int  # the joint's estimate of wrong labels
    suspects: int
    seconds: float
    model: str | None = None
    aspect: str | None = None  # the aspect audited, for aspect labels (one report per aspect)
    meta_version: int = layout.META_VERSION
