"""One classifier training run, the part `senti train` and `senti distill` share; each supplies its model and loss.

As in setfit's `DistillationTrainer(Trainer)`: a subclass answers three hooks, `default_lr` (when --lr is not
given), `prepare` (data, model, checkpoint metadata, the metrics' opening record) and `loss` (one batch), and
`ClassifierRun.run` owns the rest: runtime and device, the output folder, evaluation on dev (choosing the n-gram
head's weight when the model has one), saving the best checkpoint, the loop, metrics.json and the curves, and
the end of an interrupted run.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from senti.core import layout
from senti.core.checkpoint import CheckpointMeta
from senti.core.errors import SentiError
from senti.core.runtime import configure_runtime
from senti.toolkit.evaluation.evaluate import choose_ngram_weight, predict_logits
from senti.toolkit.evaluation.metrics import classification_metrics
from senti.toolkit.records import TrainingMetrics
from senti.toolkit.training.checkpoint import refuse_existing, save_checkpoint
from senti.toolkit.training.config import RunConfig
from senti.toolkit.training.loop import fit, raise_if_interrupted


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
    """The precision training will really use; says so when --amp cannot apply."""
    if not config.amp:
        return "fp32"
    if device == "cpu":
        say("--amp has no effect on CPU (Paddle's AMP runs only on accelerators): training in fp32")
        return "fp32"
    if config.amp_dtype == "bfloat16":
        import paddle

        if device == "gpu" and not paddle.amp.is_bfloat16_supported():
            raise SentiError("this GPU does not support bfloat16; use --amp-dtype float16")
        return "bf16"
    return "fp16"


def finish_run(out: Path, metrics: TrainingMetrics) -> None:
    """metrics.json and the curves PNG, also after an interruption."""
    from senti.toolkit.training.plots import plot_training_curves

    metrics.write(out)
    plot_training_curves(metrics, out / layout.CURVES_PNG)


class ClassifierRun:
    """A run's shared state and steps; `prepare` must set `model`, `tokenizer`, `labels`, `train_ids`, `dev_ids`,
    `dev_y`, `meta` (a CheckpointMeta), `precision`, `metrics` and `train_hashes`; it may set `extra_parameters` (more (name,
    parameter) pairs that train). With several workers `run` wraps the model in DataParallel as `net`."""

    # set by `prepare`
    model: Any
    tokenizer: Any
    labels: list[str]
    train_ids: list[list[int]]
    dev_ids: list[list[int]]
    dev_y: np.ndarray
    meta: CheckpointMeta
    precision: str
    metrics: TrainingMetrics
    train_hashes: np.ndarray  # every text learned from, ancestors' too (toolkit.seen)
    heldout_hashes: np.ndarray | None = None  # dev and test texts, ancestors' too: a replay never trains on them
    adjust_counts: np.ndarray | None = None  # training rows per class, when the logit adjustment is chosen on dev

    def __init__(self, config, say=print, progress=None):
        import paddle.distributed as dist

        self.runtime = configure_runtime(config.threads)
        self.out = Path(config.output_dir)
        refuse_existing(self.out, config.overwrite)
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.main = self.rank == 0
        self.say = say if self.main else (lambda _: None)
        self.progress = progress if self.main else None
        if config.lr is None:
            lr, why = self.default_lr(config)
            config = replace(config, lr=lr)
            self.say(f"learning rate {lr:g}: {why}; --lr sets another")
        self.config = config
        self.device = select_device(config.device)
        self.net = None
        self.extra_parameters: list = []

    # --- the hooks ---------------------------------------------------------------------------------------------

    def default_lr(self, config) -> tuple[float, str]:
        raise NotImplementedError

    def prepare(self) -> None:
        raise NotImplementedError

    def loss(self, index):
        """(loss tensor, {term: float} or None) for the training examples in `index`."""
        raise NotImplementedError

    # --- shared ------------------------------------------------------------------------------------------------

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

    def evaluate(self, epoch: int, step: int) -> dict:
        """The dev record: accuracy and macro-F1, and with the n-gram head its dev-chosen weight and each side alone."""
        if self.two_sided:  # one pass over dev gives both sides; the answer at the chosen weight follows from them
            extra, logits = choose_ngram_weight(self.model, self.dev_ids, self.dev_y, self.adjust_counts)
        else:
            extra, logits = {}, predict_logits(self.model, self.dev_ids)
        result = classification_metrics(self.dev_y, logits.argmax(1), self.labels)
        return {"epoch": epoch, "step": step, "dev_accuracy": result["accuracy"], "dev_macro_f1": result["macro_f1"],
                **extra}

    def save(self, record: dict) -> None:
        from senti.toolkit.data.seen import hashes_writer

        extra = {layout.TRAIN_TEXT_HASHES: hashes_writer(self.train_hashes)}
        if self.heldout_hashes is not None:
            extra[layout.HELDOUT_TEXT_HASHES] = hashes_writer(self.heldout_hashes)
        save_checkpoint(self.model, self.tokenizer, self.out, replace(self.meta, dev=record, precision=self.precision),
                        self.config, extra=extra)

    def agreement(self) -> dict:
        """What every worker must share: the settings that shape training and the data as encoded (so a different
        file, vocabulary or length shows), not paths or threads, which may differ between machines."""
        import hashlib

        local = {"output_dir", "threads", "overwrite", "device", "trust_pickle", "dataset", "model", "replay",
                 "teacher", "student", "extra_texts"}
        data = hashlib.sha256()
        for ids in (*self.train_ids, *self.dev_ids):
            data.update(np.asarray(ids, dtype=np.int64).tobytes())
        return {**{k: v for k, v in self.config.to_json().items() if k not in local}, "data_sha256": data.hexdigest(),
                "labels": list(self.labels)}

    def run(self) -> dict:
        """Prepare, join the other workers, train, write metrics.json and the curves; returns the metrics (raises
        if interrupted). What one rank does alone happens in `prepare`, before the group exists."""
        import paddle

        from senti.toolkit.training.collective import census, join, nodes

        self.prepare()
        if self.world > 1:
            join(self.agreement())
            self.net = paddle.DataParallel(self.model)  # starts every replica from rank 0's weights
        parallel = {"world_size": self.world, "nodes": nodes()}
        self.metrics.world_size, self.metrics.nodes = self.world, parallel["nodes"]
        self.meta = replace(self.meta, parallel=parallel)
        if self.main:
            self.out.mkdir(parents=True, exist_ok=True)  # the settings are saved with the first checkpoint
        fit(self.net or self.model, self.model, self.config, [len(e) for e in self.train_ids], self.loss,
            self.evaluate, self.save, self.precision, self.metrics, say=self.say, progress=self.progress,
            extra_parameters=self.extra_parameters)
        self.metrics.workers = census(self.model, len(self.metrics.step_losses), self.world)
        if self.main:
            finish_run(self.out, self.metrics)
        raise_if_interrupted(self.metrics, self.out)
        return self.metrics.to_json()

