"""The training loop shared by `senti train` and `senti distill`: only the loss differs between them.

AdamW with linear warmup and decay, global-norm clipping, optional AMP with a GradScaler,
length-bucketed batches split across data-parallel workers, evaluation with best-checkpoint
saving and early stopping, NaN detection, and a clean stop on SIGINT/SIGTERM.
"""

from __future__ import annotations

import math
import time
from typing import Literal

import numpy as np

from senti.core import stopping
from senti.core.errors import SentiError
from senti.toolkit.data.batching import length_bucketed_batches
from senti.toolkit.records import TrainingMetrics


class TrainingDiverged(SentiError):
    """The loss became NaN or infinite."""


class TrainingInterrupted(SentiError):
    """SIGINT or SIGTERM arrived; the best checkpoint so far is intact. Exits as the shell would for the signal."""

    def __init__(self, message: str):
        super().__init__(message)
        self.exit_code = stopping.exit_code()


class BudgetPlan:
    """The length of a run that lasts a time budget, in steps, estimated from its pace: `update` after each step.
    The schedule below warms up over `warmup` of it and decays to zero at its end, so the learning rate reaches
    zero when the minutes run out (an epoch-length schedule ended long before them, or was cut off mid-decay)."""

    def __init__(self, budget_s: float, warmup: float, first_guess: int):
        self.budget_s, self.warmup, self.total = budget_s, warmup, max(1, first_guess)

    def update(self, steps_done: int, steps_this_run: int, seconds_this_run: float, seconds_before: float) -> None:
        left = max(0.0, self.budget_s - seconds_before - seconds_this_run)
        self.total = max(steps_done + 1, int(steps_done + left * steps_this_run / max(seconds_this_run, 1e-9)))

    def factor(self, step: int) -> float:
        warmup = max(1, int(self.warmup * self.total))
        if step < warmup:
            return step / warmup
        return max(0.0, (self.total - step) / max(1, self.total - warmup))


def make_optimizer(named_parameters: list, config, total_steps: int, plan: BudgetPlan | None = None):
    """AdamW (no decay on biases and norms) under a linear warmup-then-decay schedule, over `total_steps` or, given a
    BudgetPlan, over the steps it estimates."""
    import paddle
    from paddlenlp.transformers import LinearDecayWithWarmup

    schedule = (LinearDecayWithWarmup(config.lr, total_steps, config.warmup) if plan is None
                else paddle.optimizer.lr.LambdaDecay(config.lr, plan.factor))
    no_decay = {p.name for n, p in named_parameters if "bias" in n or "norm" in n}
    optimizer = paddle.optimizer.AdamW(
        learning_rate=schedule, parameters=[p for _, p in named_parameters], weight_decay=config.weight_decay,
        apply_decay_param_fun=lambda name: name not in no_decay,
        grad_clip=paddle.nn.ClipGradByGlobalNorm(config.max_grad_norm),
    )
    return optimizer, schedule


def optimizer_step(loss, optimizer, scaler=None) -> None:
    """Backward and update; with fp16 the GradScaler scales the loss and skips steps with inf gradients."""
    if scaler:
        scaled = scaler.scale(loss)
        scaled.backward()
        scaler.minimize(optimizer, scaled)
    else:
        loss.backward()
        optimizer.step()
    optimizer.clear_grad()


class _KeepBest:
    """Evaluation on dev with best-checkpoint saving: `keep(epoch, step)` records the evaluation and says whether
    it improved (every rank evaluates, so early-stop decisions agree; the main process alone saves and says)."""

    def __init__(self, evaluate, save, metrics: TrainingMetrics, main_process: bool, say):
        self.evaluate, self.save, self.metrics, self.main_process, self.say = evaluate, save, metrics, main_process, say

    def __call__(self, epoch: int, step: int) -> bool:
        record = self.evaluate(epoch, step)
        self.metrics.evaluations.append(record)
        best = self.metrics.best
        improved = best is None or (record["dev_accuracy"], record["dev_macro_f1"]) > (
            best["dev_accuracy"], best["dev_macro_f1"])
        if improved:
            self.metrics.best = record
            if self.main_process:
                self.save(record)
        if self.main_process:
            self.say(f"epoch {epoch} step {step}: dev accuracy {record['dev_accuracy']:.4f}, "
                     f"macro-F1 {record['dev_macro_f1']:.4f}{'  (best, saved)' if improved else ''}")
        return improved


def _checked_loss(loss_fn, index, precision: str):
    """(loss tensor, its value, terms) of one batch under AMP when asked."""
    import paddle

    amp_dtype: Literal["bfloat16", "float16"] = "bfloat16" if precision == "bf16" else "float16"  # ignored when AMP is off
    with paddle.amp.auto_cast(enable=precision != "fp32", dtype=amp_dtype, level="O1"):
        loss, terms = loss_fn(index)
    return loss, float(loss), terms


def divergence(model, value: float, epoch: int, step: int, precision: str, best: dict | None, output_dir: str) -> str:
    """What a NaN or infinite loss says: the starting weights when they already hold such values before the first
    step (no learning rate is to blame then), else the learning rate; and whether any checkpoint was kept."""
    import paddle

    damaged = next((name for name, p in model.named_parameters()
                    if not bool(paddle.isfinite(p).all())), None) if step == 0 else None
    if damaged:
        cause = f"the starting weights hold NaN or infinite values ({damaged}): the model given is damaged"
    else:
        cause = f"lower --lr{' or train without --amp' if precision != 'fp32' else ''}"
    kept = (f"the best checkpoint so far (step {best['step']}) is kept in {output_dir}" if best
            else "no checkpoint was saved")
    return f"loss became {value} at epoch {epoch}, step {step + 1} ({precision}); {cause}. {kept.capitalize()}"


def fit(net, model, config, lengths, loss_fn, evaluate, save, precision: str, metrics: TrainingMetrics,
        say=print, progress=None, extra_parameters=()) -> TrainingMetrics:
    """Train `net` (`model`, maybe wrapped in DataParallel) and fill `metrics`; returns it.

    `loss_fn(index)` runs the forward pass for the examples in `index` and returns
    (loss tensor, {term: float}); `evaluate(epoch, step)` returns a dev record with
    `dev_accuracy` and `dev_macro_f1`; `save(record)` keeps the checkpoint (main process only).
    `extra_parameters` are (name, parameter) pairs that train too (distillation projections).
    """
    import paddle
    import paddle.distributed as dist

    world, rank = dist.get_world_size(), dist.get_rank()
    main_process = rank == 0
    rng = np.random.default_rng(config.seed)
    steps_per_epoch = len(lengths) // config.batch_size // world or 1
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    optimizer, schedule = make_optimizer(list(model.named_parameters()) + list(extra_parameters), config,
                                         total_steps)
    scaler = paddle.amp.GradScaler(init_loss_scaling=config.init_loss_scaling) if precision == "fp16" else None
    metrics.epochs, metrics.evaluations, metrics.step_losses, metrics.step_terms = [], [], [], []
    metrics.best, metrics.interrupted, metrics.stopped_early = None, None, False
    keep = _KeepBest(evaluate, save, metrics, main_process, say)

    step, stale = 0, 0
    # Signals are recorded and read between steps, so no step is cut in half (from a thread other than the main
    # one Python installs no handlers: the caller stops the run).
    with stopping.stop_at_checkpoints(stopping.INTERRUPTS):
        for epoch in range(1, config.epochs + 1):
            batches = length_bucketed_batches(lengths, config.batch_size, rng)
            batches = batches[: steps_per_epoch * world][rank::world]
            net.train()
            started, samples, tokens, losses, stopped = time.perf_counter(), 0, 0, [], False
            task = progress.add_task(f"epoch {epoch}", total=len(batches)) if progress and main_process else None
            for index in batches:
                loss, loss_value, terms = _checked_loss(loss_fn, index, precision)
                if not math.isfinite(loss_value):
                    raise TrainingDiverged(divergence(model, loss_value, epoch, step, precision, metrics.best,
                                                      config.output_dir))
                optimizer_step(loss, optimizer, scaler)
                schedule.step()
                step += 1
                samples += len(index)
                tokens += int(sum(lengths[i] for i in index))
                losses.append(loss_value)
                metrics.step_losses.append(loss_value)
                if terms:
                    metrics.step_terms.append(terms)
                if task is not None:
                    progress.update(task, advance=1, description=f"epoch {epoch} loss {loss_value:.3f}")
                if config.eval_every and step % config.eval_every == 0:
                    stale = 0 if keep(epoch, step) else stale + 1
                if stopping.signal_name() or (config.max_steps and step >= config.max_steps) or (
                        config.early_stop and stale >= config.early_stop):
                    stopped = True
                    break
            wall = time.perf_counter() - started
            if task is not None:
                progress.remove_task(task)
            if stopping.signal_name():
                metrics.interrupted = {"signal": stopping.signal_name(), "epoch": epoch, "step": step}
                break
            if not config.eval_every:
                stale = 0 if keep(epoch, step) else stale + 1
            last = metrics.evaluations[-1] if metrics.evaluations else {}
            metrics.epochs.append({
                "epoch": epoch, "steps": len(losses), "wall_seconds": wall,
                "train_samples_per_s": samples * world / wall, "train_tokens_per_s": tokens * world / wall,
                "train_loss": float(np.mean(losses)) if losses else None,
                "dev_accuracy": last.get("dev_accuracy"), "dev_macro_f1": last.get("dev_macro_f1"),
            })
            if config.early_stop and stale >= config.early_stop:
                metrics.stopped_early = True
                say(f"early stop: no dev improvement in {stale} evaluations")
                break
            if stopped:
                break
    return metrics


def raise_if_interrupted(metrics: TrainingMetrics, out) -> None:
    if metrics.interrupted:
        best = metrics.best
        kept = f"best checkpoint (step {best['step']}) kept in {out}" if best else "no checkpoint had been saved yet"
        raise TrainingInterrupted(f"training interrupted by {metrics.interrupted['signal']} at step "
                                  f"{metrics.interrupted['step']}; {kept}")
