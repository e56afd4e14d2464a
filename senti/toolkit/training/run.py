"""The one run that `senti train`, `senti distill` and `senti pretrain` share, and the classifier runs' part.

As in setfit's `DistillationTrainer(Trainer)`: `Run` owns the step loop and what surrounds it (runtime and
device, the output folder and resuming, the learning rate resolved before the start, joining the other workers and
agreeing on settings, the optimizer and its schedule, AMP, the finite-loss check, the census, the end of an
interrupted or diverged run), and a subclass answers eight hooks (docs/ARCHITECTURE.md, "One run"): `prepare`
(data, model, metrics), `agreement`, `examples`, `epoch_batches`, `loss` (one batch), `callbacks`, `finish` and
`kept`. The cadence around the steps (evaluation, saving, early stop, the time budget, interruption, records,
progress) is callbacks (training/callbacks.py) that set flags on a `Control` the loop acts on. `ClassifierRun` adds
what `senti train` and `senti distill` share: evaluation on dev (choosing the n-gram head's weight when the model has
one), keeping the best checkpoint, early stopping, metrics.json and the curves. `PretrainRun`
(training/pretrain.py) adds masking, held-out MLM figures, saving every N steps, resuming and a time budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import numpy as np

from senti.core import layout, stopping
from senti.core.checkpoint import CheckpointMeta, EvalPoint, Parallel
from senti.core.errors import SentiError
from senti.core.runtime import configure_runtime
from senti.core.scores import mean_log_loss
from senti.core.sequence import length_to_use
from senti.toolkit.evaluation.evaluate import choose_ngram_weight, predict_logits
from senti.toolkit.evaluation.metrics import classification_metrics
from senti.toolkit.records import EpochRecord, Interrupted, Interval, ParentAgainstKept, PassedBaseline, TrainingMetrics
from senti.toolkit.training.callbacks import (
    Callback,
    Control,
    EarlyStopping,
    EvaluationCadence,
    Interruption,
    ProgressBar,
    TimeBudget,
)
from senti.toolkit.training.checkpoint import refuse_existing, save_checkpoint
from senti.toolkit.training.collective import census, join, nodes
from senti.toolkit.training.config import DEFAULT_SEQ_LEN, ClassifierConfig, RunConfig
from senti.toolkit.training.loop import (
    BudgetPlan,
    Clock,
    TrainingDiverged,
    TrainingInterrupted,
    divergence,
    make_optimizer,
    optimizer_step,
)
from senti.toolkit.training.resume import read_state


def available_devices() -> dict[str, bool]:
    """Which of senti's devices this paddle build can use."""
    import paddle

    return {
        "cpu": True,
        "gpu": paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0,
        "xpu": paddle.device.is_compiled_with_xpu(),
        "npu": "npu" in (paddle.device.get_all_custom_device_type() or []),
    }


def launcher_device(name: str) -> str:
    """`auto` resolved for `paddle.distributed.launch`, which must know whether it starts CPU processes
    or one per accelerator: a GPU when one is visible, else the CPU."""
    if name != "auto":
        return name
    return "gpu" if available_devices()["gpu"] else "cpu"


def select_device(name: str) -> str:
    """Resolve `auto` and check that the requested device exists; returns paddle's device name."""
    import paddle

    available = available_devices()
    if name == "auto":
        name = next(d for d in ("gpu", "xpu", "npu", "cpu") if available[d])
    if not available[name]:
        raise SentiError(f"device '{name}' is not available to this paddle build (see `senti info`)")
    if name == "cpu":
        paddle.set_device("cpu")
    else:
        paddle.set_device(f"{name}:{paddle.distributed.ParallelEnv().device_id}")
    return name


def resolve_precision(config: RunConfig, device: str, say) -> str:
    """The precision training will really use; says so when --amp cannot apply. `--amp-dtype auto` is bfloat16 on
    a CPU, float16 on an accelerator."""
    if not config.amp:
        return "fp32"
    dtype = config.amp_dtype if config.amp_dtype != "auto" else "bfloat16" if device == "cpu" else "float16"
    if device == "cpu":
        return _cpu_precision(dtype, say)
    if dtype == "bfloat16":
        import paddle

        if device == "gpu" and not paddle.amp.is_bfloat16_supported():
            raise SentiError("this GPU does not support bfloat16; use --amp-dtype float16")
        return "bf16"
    return "fp16"


def _cpu_precision(dtype: str, say) -> str:
    """bf16 where this CPU and Paddle's oneDNN can multiply in bfloat16 (bf16.py), else fp32, saying why."""
    from senti.kernels import bf16

    why = "float16 has no fast path on a CPU (use --amp-dtype bfloat16)" if dtype == "float16" else bf16.why_not()
    if why is not None:
        say(f"--amp on this CPU: {why}; training in fp32")
        return "fp32"
    say("--amp on this CPU: Linear layers multiply in bfloat16 through oneDNN (float32 weights and accumulation)")
    return "bf16"


@dataclass
class Step:
    """One batch's forward pass: the loss tensor, its terms by name (None with a single term) and the tokens read."""

    loss: Any
    terms: dict | None = None
    tokens: int = 0


@dataclass
class EpochStats:
    """What one epoch of this worker took: steps, examples, tokens, losses and wall seconds."""

    epoch: int
    samples: int = 0
    tokens: int = 0
    losses: list = field(default_factory=list)
    wall_seconds: float = 0.0


Settings = TypeVar("Settings", bound=RunConfig)


def settled_lr(config, default: Callable[[], tuple[float, str]], say):
    """The settings with the learning rate resolved before the run starts: `--lr` when given, else `default()`
    (a rate and why; asked only then), said."""
    if config.lr is not None:
        return config
    lr, why = default()
    say(f"learning rate {lr:g}: {why}; --lr sets another")
    return replace(config, lr=lr)


class Run(Generic[Settings]):
    """A run's shared state and its step loop. A subclass answers eight hooks: `prepare` (data, model, metrics;
    it may set `precision` and `extra_parameters`, more (name, parameter) pairs that train), `agreement`,
    `examples`, `epoch_batches`, `loss` (one batch's Step), `callbacks` (the cadence: training.callbacks), `finish`
    (the records) and `kept` (what the output folder holds, said when a run is interrupted or diverges). With
    several workers `run` wraps the model in DataParallel as `net`. A `resumable` run continues the run whose
    state its output folder holds (read into `state`); any other refuses a folder that holds someone else's files."""

    model: Any
    metrics: Any
    precision: str = "fp32"
    task_name = "training"
    resumable = False

    def __init__(self, config: Settings, default_lr: Callable[[], tuple[float, str]], say=print, progress=None):
        import paddle.distributed as dist

        self.runtime = configure_runtime(config.threads)
        self.out = Path(config.output_dir)
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.main = self.rank == 0
        self.say = say if self.main else (lambda _: None)
        self.progress = progress if self.main else None
        self.state = read_state(self.out) if self.resumable and not config.overwrite else None
        if self.state is None:
            refuse_existing(self.out, config.overwrite)
        self.config: Settings = settled_lr(config, default_lr, self.say)
        self.device = select_device(config.device)
        self.net: Any = None
        self.extra_parameters: list = []
        self.step = 0  # optimizer steps taken, a resumed run's earlier ones included
        self.epoch = 1
        self.total = 0  # the steps planned (a time budget's plan may end the run sooner or later)
        self.plan: BudgetPlan | None = None
        self.tokens_this_run = 0  # tokens read by this process's steps since the loop (re)started
        self.clock = Clock()
        self.started = time.perf_counter()  # the command's start, near enough: time to the baseline counts from it

    # --- the hooks ---------------------------------------------------------------------------------------------

    def prepare(self) -> None:
        raise NotImplementedError

    def agreement(self) -> dict:
        """What every worker must share before training together."""
        raise NotImplementedError

    def examples(self) -> int:
        """Training examples in an epoch (all workers together)."""
        raise NotImplementedError

    def epoch_batches(self, epoch: int) -> list:
        """The epoch's batches of example indices (all workers'; the run deals them out)."""
        raise NotImplementedError

    def loss(self, index) -> Step:
        raise NotImplementedError

    def callbacks(self) -> list[Callback]:
        """The run's cadence (evaluation, saving, early stop, time budget, records, progress), in firing order;
        `Interruption` is put first by the loop."""
        raise NotImplementedError

    def finish(self) -> None:
        """The main process writes the records (also after an interruption)."""

    def kept(self) -> str:
        """What the output folder holds now (said after an interruption or a diverged loss)."""
        raise NotImplementedError

    # --- the run -----------------------------------------------------------------------------------------------

    def run(self):
        """Prepare, join the other workers, train, write the records; returns the metrics record (raises if
        interrupted). What one rank does alone happens in `prepare`, before the group exists."""
        import paddle

        self.prepare()
        kernels = None  # on an accelerator, Paddle's own
        if self.device == "cpu":  # senti's C kernels (or its Python ones): Paddle's CPU kernels are slow
            from senti.kernels.cpu_kernels import kernels_that_run, use_cpu_kernels

            switched = use_cpu_kernels(self.model, self.config.seed + self.rank, bf16=self.precision == "bf16")
            kernels = kernels_that_run(switched)
        self.kernels = kernels  # senti.json says it at each save, metrics.json at the end
        if self.world > 1:
            join(self.agreement())
            self.net = paddle.DataParallel(self.model)  # starts every replica from rank 0's weights
        self.loop()
        self.metrics.workers = census(self.model, self.step, self.world)
        self.metrics.kernels = kernels
        if self.main:
            self.finish()
        if self.metrics.interrupted:
            raise TrainingInterrupted(f"{self.task_name} interrupted by {self.metrics.interrupted.signal} at step "
                                      f"{self.metrics.interrupted.step}; {self.kept()}")
        return self.metrics

    def loop(self) -> None:
        """Epochs of length-bucketed batches dealt out to the workers, until the last step or a callback's stop.
        Signals are recorded and read between steps, so no step is cut in half (from a thread other than the
        main one Python installs no handlers: the caller stops the run)."""
        config = self.config
        per_epoch = max(1, self.examples() // config.batch_size // self.world)
        self.total = min(config.epochs * per_epoch, config.max_steps or config.epochs * per_epoch)
        callbacks = [Interruption(), *self.callbacks()]
        budget = next((c for c in callbacks if isinstance(c, TimeBudget)), None)
        self.plan = budget.plan(self.total, config.warmup) if budget else None
        if self.plan is not None:
            self.total = 10**12  # the clock ends the run
        self.optimizer, self.schedule = make_optimizer(
            list(self.model.named_parameters()) + list(self.extra_parameters), config, self.total, self.plan)
        scaler, control = self._grad_scaler(), Control()
        _fire(callbacks, "on_train_begin", self, control)
        first = self.step
        self.clock = Clock(budget.minutes, budget.prior_minutes) if budget else Clock()
        self.tokens_this_run, self.epoch = 0, self.step // per_epoch + 1
        with stopping.stop_at_checkpoints(stopping.INTERRUPTS):
            while self.step < self.total and not control.stop:
                batches = self.epoch_batches(self.epoch)[: per_epoch * self.world][self.rank::self.world]
                batches = batches[max(0, self.step - (self.epoch - 1) * per_epoch):]
                if not batches:
                    break
                stats = self._epoch(batches, first, scaler, (callbacks, control))
                if stopping.signal_name():
                    self.metrics.interrupted = Interrupted(stopping.signal_name() or "", self.step, self.epoch)
                    break
                _fire(callbacks, "on_epoch_end", self, control, stats)
                _act(callbacks, self, control)
                _fire(callbacks, "on_epoch_record", self, control, stats)
                self.epoch += 1
        _fire(callbacks, "on_train_end", self, control)

    def _epoch(self, batches: list, first: int, scaler, cadence: tuple[list[Callback], Control]) -> EpochStats:
        """One epoch's steps (or until a callback stops the run), each followed by the callbacks."""
        callbacks, control = cadence
        (self.net or self.model).train()
        stats, started = EpochStats(self.epoch), time.perf_counter()
        for index in batches:
            step, value = self._train_step(index, scaler)
            if self.plan is not None:
                self.plan.update(self.step, self.step - first, self.clock.this_run_seconds(), self.clock.prior_s)
            self.schedule.step()
            self.tokens_this_run += step.tokens
            stats.samples, stats.tokens = stats.samples + len(index), stats.tokens + step.tokens
            stats.losses.append(value)
            control.planned_end = self.step >= self.total
            _fire(callbacks, "on_step_end", self, control, step, value)
            _act(callbacks, self, control)
            if control.last:
                break
        stats.wall_seconds = time.perf_counter() - started
        return stats

    def _grad_scaler(self):
        """A GradScaler when the run trains in fp16 (--amp on an accelerator), else None."""
        import paddle

        if self.precision != "fp16":
            return None
        return paddle.amp.GradScaler(init_loss_scaling=self.config.init_loss_scaling)

    def _train_step(self, index, scaler) -> tuple[Step, float]:
        """Forward (under AMP when it applies), the finite-loss check, backward and update."""
        import paddle

        amp_dtype: Literal["bfloat16", "float16"] = "bfloat16" if self.precision == "bf16" else "float16"  # unused off AMP
        on_accelerator = self.precision != "fp32" and self.device != "cpu"  # a CPU's bf16 is in its Linears
        with paddle.amp.auto_cast(enable=on_accelerator, dtype=amp_dtype, level="O1"):
            step = self.loss(index)
        value = float(step.loss)
        if not math.isfinite(value):
            raise TrainingDiverged(divergence(self.model, value, self.epoch, self.step, self.precision, self.kept()))
        optimizer_step(step.loss, self.optimizer, scaler)
        self.step += 1
        return step, value


def _fire(callbacks: list[Callback], event: str, run: Run, control: Control, *args) -> None:
    for callback in callbacks:
        getattr(callback, event)(run, control, *args)


def _act(callbacks: list[Callback], run: Run, control: Control) -> None:
    """The flags the callbacks set: an evaluation, then a save, each fired to every callback."""
    if control.evaluate:
        control.evaluate = False
        _fire(callbacks, "on_evaluate", run, control)
    if control.save:
        control.save = False
        _fire(callbacks, "on_save", run, control)


def finish_run(out: Path, metrics: TrainingMetrics) -> None:
    """metrics.json and the curves PNG, also after an interruption."""
    from senti.toolkit.training.plots import plot_training_curves

    metrics.write(out)
    plot_training_curves(metrics, out / layout.CURVES_PNG)


Classifier = TypeVar("Classifier", bound=ClassifierConfig)


OLD_DEV_MARGIN = 0.01  # what a continued model may lose on its parent's own dev split and still be kept
SMALL_DEV = 100  # below this many dev texts, one text moves accuracy by a point or more: said, and log-loss breaks ties


def accuracy_interval(accuracy: float, n: int) -> float:
    """Half-width of the 95% interval of an accuracy measured on `n` texts (Agresti-Coull: two successes and two
    failures added, so 32 of 32 right is not a certainty)."""
    k = accuracy * n
    p = (k + 2) / (n + 4)
    return round(1.96 * float(np.sqrt(p * (1 - p) / (n + 4))), 4)


def balanced_weights(y: np.ndarray, k: int) -> np.ndarray:
    """scikit-learn's "balanced" class weights: n / (k x rows of the class); a class with no row gets 1."""
    counts = np.bincount(y, minlength=k).astype(np.float32)
    return np.where(counts > 0, len(y) / (k * np.maximum(counts, 1)), 1.0).astype(np.float32)


def better(record: EvalPoint, best: EvalPoint, small_dev: bool = True, macro_first: bool = False) -> bool:
    """Whether a dev record beats the best so far: accuracy, then macro-F1 (the other way round with
    `macro_first`), then, on a small dev set (where checkpoints often score the same), the lower log-loss."""
    mine, theirs = (record.dev_accuracy, record.dev_macro_f1), (best.dev_accuracy, best.dev_macro_f1)
    if macro_first:
        mine, theirs = mine[::-1], theirs[::-1]
    if mine != theirs or not small_dev:
        return mine > theirs
    return _or_inf(record.dev_log_loss) < _or_inf(best.dev_log_loss)


def _or_inf(value: float | None) -> float:
    return np.inf if value is None else value


class ClassifierRun(Run[Classifier]):
    """`senti train` and `senti distill`: `prepare` must set `model`, `tokenizer`, `labels`, `train_ids`, `dev_ids`,
    `dev_y`, `meta` (a CheckpointMeta), `precision`, `metrics` and `train_hashes`; `loss` gives one batch's Step.
    Evaluation on dev at each epoch's end (or every `eval_every` steps) keeps the best checkpoint and stops early
    after `early_stop` evaluations without improvement."""

    # set by `prepare`
    tokenizer: Any
    labels: list[str]
    train_ids: list[list[int]]
    dev_ids: list[list[int]]
    dev_y: np.ndarray
    meta: CheckpointMeta
    metrics: TrainingMetrics
    train_hashes: np.ndarray  # every text learned from, ancestors' too (toolkit.data.seen)
    heldout_hashes: np.ndarray | None = None  # dev and test texts, ancestors' too: a replay never trains on them
    adjust_counts: np.ndarray | None = None  # training rows per class, when the logit adjustment is chosen on dev
    # Continuing a checkpoint (set by `senti train`): the parent, before any step, is the first candidate, and the
    # parent's own dev split (encoded ids, labels) guards what it knew.
    parent_first: bool = False
    old_dev: tuple[list, np.ndarray] | None = None
    held_ngram_weight: float | None = None  # the parent's n-gram weight, kept when the new dev is too small to choose
    weight_by_log_loss = False  # the n-gram weight chosen by dev log-loss, not accuracy (a refitted table, small dev)
    # `--interpolate` (toolkit.training.blend): off, auto or the child's share of the parent-child blend tried at
    # the end, and the two sets of weights blends are made from
    interpolate: str = "off"
    choose_by_macro_f1 = False  # the kept checkpoint: the best on dev by accuracy, or by macro-F1 first
    parent_weights: dict | None = None
    child_weights: dict | None = None

    @property
    def pad_id(self) -> int:
        """The id batches are padded with: the model's own (XLM-R's is 1)."""
        from senti.core.batching import model_pad_id

        return model_pad_id(self.model)

    # --- what the loop asks ------------------------------------------------------------------------------------

    def agreement(self) -> dict:
        """What every worker must share: the settings that shape training and the data as encoded (so a different
        file, vocabulary or length shows), not paths or threads, which may differ between machines."""
        import hashlib

        local = {"output_dir", "threads", "overwrite", "device", "trust_pickle", "dataset", "model", "replay",
                 "teacher", "student", "extra_texts", "unlabeled"}
        data = hashlib.sha256()
        for ids in (*self.train_ids, *self.dev_ids):
            data.update(np.asarray(ids, dtype=np.int64).tobytes())
        return {**{k: v for k, v in self.config.to_json().items() if k not in local}, "data_sha256": data.hexdigest(),
                "labels": list(self.labels)}

    @cached_property
    def lengths(self) -> list[int]:
        """Tokens of each training example, as `prepare` encoded them."""
        return [len(e) for e in self.train_ids]

    def examples(self) -> int:
        return len(self.train_ids)

    def epoch_batches(self, epoch: int) -> list:
        from senti.toolkit.data.batching import length_bucketed_batches

        return length_bucketed_batches(self.lengths, self.config.batch_size, self.rng)

    def tokens(self, index) -> int:
        return int(sum(self.lengths[i] for i in index))

    def callbacks(self) -> list[Callback]:
        return [KeepBest(), EvaluationCadence(self.config.eval_every), EarlyStopping(self.config.early_stop),
                ProgressBar(lambda run, value: f"epoch {run.epoch} loss {value:.3f}")]

    def kept(self) -> str:
        best = self.metrics.best
        return f"the best checkpoint so far (step {best.step}) is kept in {self.out}" if best \
            else "no checkpoint was saved"

    def open_records(self) -> None:
        """The run's records opened once the optimizer exists; the parent, when continuing one, is the first
        checkpoint."""
        parallel = Parallel(self.world, nodes())
        self.metrics.world_size, self.metrics.nodes = parallel.world_size, parallel.nodes
        self.meta = replace(self.meta, parallel=parallel)
        if self.main:
            self.out.mkdir(parents=True, exist_ok=True)  # the settings are saved with the first checkpoint
        self.rng = np.random.default_rng(self.config.seed)
        metrics = self.metrics
        metrics.epochs, metrics.evaluations, metrics.step_losses, metrics.step_terms = [], [], [], []
        metrics.best, metrics.interrupted, metrics.stopped_early = None, None, False
        self.stale = 0  # evaluations since the last improvement
        answers, what = self.dev_answers()
        if answers < SMALL_DEV and self.main:
            self.say(f"dev has {answers} {what}: one moves its accuracy by {100 / answers:.1f} points, so checkpoints "
                     "that score the same are told apart by dev log-loss; its figures are coarse")
        if self.parent_first:
            self.keep_parent()

    def settle_length(self, parent) -> int:
        """The sequence length to train at (continuing a checkpoint, `parent` its metadata, keeps the length it was
        trained at), set in the settings."""
        trained_at = parent.max_seq_len if parent else DEFAULT_SEQ_LEN
        max_len = length_to_use(self.config.max_seq_len, trained_at)
        self.config = replace(self.config, max_seq_len=max_len)
        return max_len

    def dev_answers(self) -> tuple[int, str]:
        """How many answers dev accuracy is over, and what they are."""
        return len(self.dev_ids), "texts"

    def record_epoch(self, stats: EpochStats) -> None:
        last = self.metrics.evaluations[-1] if self.metrics.evaluations else None
        wall = stats.wall_seconds
        self.metrics.epochs.append(EpochRecord(
            epoch=stats.epoch, steps=len(stats.losses), wall_seconds=wall,
            train_samples_per_s=stats.samples * self.world / wall, train_tokens_per_s=stats.tokens * self.world / wall,
            train_loss=float(np.mean(stats.losses)) if stats.losses else None,
            dev_accuracy=last.dev_accuracy if last else None, dev_macro_f1=last.dev_macro_f1 if last else None))

    def finish(self) -> None:
        if self.interpolate != "off" and not self.metrics.interrupted:
            self.blend_with_parent()
        best = self.metrics.best
        if best is not None and best.parent:
            self.metrics.kept_parent = True
            self.say(f"no checkpoint beat the parent on the new dev labels (parent {best.dev_accuracy:.4f}): "
                     f"{self.out} holds the parent's weights")
        if self.parent_first and self.metrics.evaluations and best is not None and self.main:
            self.compare_with_parent(self.metrics.evaluations[0], best)
        finish_run(self.out, self.metrics)

    def compare_with_parent(self, parent: EvalPoint, kept: EvalPoint) -> None:
        """The parent's and the kept model's figures side by side, each with its 95% interval: on a few dozen dev
        labels the two often differ by less than the interval, and the reader should see that."""
        sizes = {"dev_accuracy": self.dev_answers()[0], "old_dev_accuracy": len(self.old_dev[1]) if self.old_dev else 0}
        table: dict[str, ParentAgainstKept] = {}
        for key, n in sizes.items():
            before, after = getattr(parent, key), getattr(kept, key)
            if n and before is not None and after is not None:
                table[key] = ParentAgainstKept(n, Interval(before, accuracy_interval(before, n)),
                                               Interval(after, accuracy_interval(after, n)))
        self.metrics.parent_comparison = table
        said = [f"{'new dev' if key == 'dev_accuracy' else 'parent dev'} ({row.texts}) "
                f"{row.parent.accuracy:.4f} ±{row.parent.interval:.3f} -> "
                f"{row.kept.accuracy:.4f} ±{row.kept.interval:.3f}" for key, row in table.items()]
        self.say(f"parent -> {'parent kept' if kept.parent else 'kept checkpoint'}: {'; '.join(said)} "
                 "(95% intervals)")

    def blend_with_parent(self) -> None:
        """`--interpolate`: the parent's weights plus a share of the best child's change (WiSE-FT), judged as a
        child is (beat the parent on the new dev labels, stay within OLD_DEV_MARGIN on its own dev); `auto` keeps
        the best of the child and its blends on the new dev labels, a share given keeps that blend when it passes."""
        from senti.toolkit.records import BlendTried
        from senti.toolkit.training.blend import blend_shares, blended

        best = self.metrics.best
        if best is None or best.parent or self.parent_weights is None or self.child_weights is None:
            return  # the parent was kept: there is no child to blend with
        parent, small = self.metrics.evaluations[0], len(self.dev_ids) < SMALL_DEV
        chosen, chosen_weights, tried = best, self.child_weights, []
        for share in blend_shares(self.interpolate):
            mixed = blended(self.parent_weights, self.child_weights, share)
            self.model.set_state_dict(mixed)
            record = replace(self.evaluate(best.epoch, best.step), blend=share)
            passes = better(record, parent, small) and not self.forgets(record)
            tried.append(BlendTried(share, passes, record.dev_accuracy, record.dev_log_loss or 0.0, record.old_dev_accuracy))
            if passes and (self.interpolate != "auto" or better(record, chosen, small)):
                chosen, chosen_weights = record, mixed
        self.metrics.blends = tried
        self.model.set_state_dict(chosen_weights)
        if chosen is best:
            shares = ", ".join(f"{t.share:g}" for t in tried)
            self.say(f"no blend of parent and child (the child's share {shares}) passed or did better on the new dev "
                     "labels: the child is kept")
            return
        self.evaluate(chosen.epoch, chosen.step)  # the n-gram weight and offsets of the chosen blend
        self.metrics.best = chosen
        self.save(chosen)
        self.say(f"kept the blend parent + {chosen.blend:g} x (child - parent): dev accuracy "
                 f"{chosen.dev_accuracy:.4f} on the new dev labels (child {best.dev_accuracy:.4f})")

    # --- evaluation and saving ---------------------------------------------------------------------------------

    @property
    def two_sided(self) -> bool:
        """The model has the n-gram head (core.ngram_head): each side learns on its own loss."""
        return hasattr(self.model, "ngram_table")

    def sides(self, input_ids, token_type_ids) -> dict:
        """{term suffix: logits}: "" for the model's answer, or "" for ERNIE's and "_ngram" for the n-gram head's."""
        net = self.net or self.model
        if self.two_sided:
            deep, wide = net(input_ids, token_type_ids=token_type_ids, return_parts=True)
            return {"": deep, "_ngram": wide}
        return {"": net(input_ids, token_type_ids=token_type_ids)}

    def evaluate(self, epoch: int, step: int) -> EvalPoint:
        """The dev record: accuracy and macro-F1, and with the n-gram head its dev-chosen weight and each side alone."""
        if self.two_sided:  # one pass over dev gives both sides; the answer at the chosen weight follows from them
            extra, logits = choose_ngram_weight(self.model, self.dev_ids, self.dev_y, self.adjust_counts,
                                                self.held_ngram_weight, self.weight_by_log_loss)
        else:
            extra, logits = {}, predict_logits(self.model, self.dev_ids)
        result = classification_metrics(self.dev_y, logits.argmax(1), self.labels)
        log_loss = mean_log_loss(logits, self.dev_y)
        return EvalPoint(epoch=epoch, step=step, dev_accuracy=result["accuracy"], dev_macro_f1=result["macro_f1"],
                         dev_log_loss=log_loss, seconds=round(time.perf_counter() - self.started, 1), **extra)

    def old_dev_accuracy(self) -> float:
        assert self.old_dev is not None
        ids, gold = self.old_dev
        return float((predict_logits(self.model, ids).argmax(1) == gold).mean())

    def keep_parent(self) -> None:
        """The parent as loaded is the first checkpoint: a child replaces it only by beating it on the new dev
        labels while losing at most OLD_DEV_MARGIN on the parent's own dev split (a few labels must never make the
        model worse than the one it started from)."""
        record = replace(self.evaluate(0, 0), parent=True)
        if self.old_dev is not None:
            record.old_dev_accuracy = self.old_dev_accuracy()
        self.metrics.evaluations.append(record)
        self.metrics.best = record
        if self.interpolate != "off":
            from senti.toolkit.training.blend import weights

            self.parent_weights = weights(self.model)
        if self.main:
            self.save(record)
        own = f", {record.old_dev_accuracy:.4f} on its own dev split" if self.old_dev is not None else ""
        guard = f" and staying within {OLD_DEV_MARGIN:.2f} of it on its own dev" if self.old_dev is not None else ""
        self.say(f"parent: dev accuracy {record.dev_accuracy:.4f} on the new dev labels ({len(self.dev_ids)}){own}; "
                 f"a checkpoint replaces it only by beating that{guard}")

    def forgets(self, record: EvalPoint) -> bool:
        """Whether a better child loses more than OLD_DEV_MARGIN on the parent's own dev split (noted in `record`)."""
        if not self.parent_first or self.old_dev is None:
            return False
        record.old_dev_accuracy = self.old_dev_accuracy()
        parent = self.metrics.evaluations[0].old_dev_accuracy
        return parent is not None and parent - record.old_dev_accuracy > OLD_DEV_MARGIN

    def keep_best(self, epoch: int) -> None:
        """Evaluate on dev and keep the checkpoint when it improved (every rank evaluates, so early-stop decisions
        agree; the main process alone saves and says)."""
        record = self.evaluate(epoch, self.step)
        self.metrics.evaluations.append(record)
        best = self.metrics.best
        improved = best is None or better(record, best, self.dev_answers()[0] < SMALL_DEV, self.choose_by_macro_f1)
        forgot = improved and self.forgets(record)
        improved = improved and not forgot
        if forgot:
            self.say(f"epoch {epoch} step {self.step}: better on the new dev labels but {record.old_dev_accuracy:.4f} "
                     "on the parent's own dev split: not kept")
        if improved:
            self.metrics.best = record
            if self.interpolate != "off":
                from senti.toolkit.training.blend import weights

                self.child_weights = weights(self.model)
            if self.main:
                self.save(record)
        self.stale = 0 if improved else self.stale + 1
        self.say(f"epoch {epoch} step {self.step}: dev accuracy {record.dev_accuracy:.4f}, "
                 f"macro-F1 {record.dev_macro_f1:.4f}{'  (best, saved)' if improved else ''}")
        dev = self.metrics.baseline.dev if self.metrics.baseline else None
        seconds = record.seconds or 0.0
        if dev is not None and self.metrics.passed_baseline is None and record.dev_accuracy > dev.accuracy:
            self.metrics.passed_baseline = PassedBaseline(self.step, seconds)
            self.say(f"dev accuracy above the baseline's ({dev.accuracy:.4f}) at step {self.step}, {seconds:.0f} s "
                     "after the start")

    def save(self, record: EvalPoint) -> None:
        from senti.toolkit.data.seen import hashes_writer

        extra = {layout.TRAIN_TEXT_HASHES: hashes_writer(self.train_hashes)}
        if self.heldout_hashes is not None:
            extra[layout.HELDOUT_TEXT_HASHES] = hashes_writer(self.heldout_hashes)
        save_checkpoint(self.model, self.tokenizer, self.out, replace(self.meta, dev=record, precision=self.precision,
                                                                     kernels=self.kernels),
                        self.config, extra=extra)


class KeepBest(Callback):
    """A classifier run's records: opened at the start (the parent first, when continuing one), each step's loss,
    an evaluation on dev when one is due (the best checkpoint kept), each epoch's figures."""

    def on_train_begin(self, run, control) -> None:
        run.open_records()

    def on_step_end(self, run, control, step, value) -> None:
        run.metrics.step_losses.append(value)
        if step.terms:
            run.metrics.step_terms.append(step.terms)

    def on_evaluate(self, run, control) -> None:
        run.keep_best(run.epoch)

    def on_epoch_record(self, run, control, stats) -> None:
        run.record_epoch(stats)
