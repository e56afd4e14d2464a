"""The parts of a run's step loop (`senti.toolkit.training.run.Run` owns the loop itself): AdamW with linear
warmup and decay (or shaped to a time budget), global-norm clipping, a step with an optional GradScaler, the
clock of a time budget, and what a diverged or interrupted run says.
"""

from __future__ import annotations

import time

from senti.core import stopping
from senti.core.errors import SentiError


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


class Clock:
    """Minutes spent on a run (earlier runs of a resumed one included) against its time budget, if any."""

    def __init__(self, max_minutes: float | None = None, prior_minutes: float = 0.0):
        self.budget_s = max_minutes * 60 if max_minutes else None
        self.prior_s, self.start = prior_minutes * 60, time.perf_counter()

    def this_run_seconds(self) -> float:
        return max(time.perf_counter() - self.start, 1e-9)

    def minutes(self) -> float:
        return (self.prior_s + self.this_run_seconds()) / 60

    def over(self) -> bool:
        return self.budget_s is not None and self.minutes() * 60 >= self.budget_s


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


def divergence(model, value: float, epoch: int, step: int, precision: str, kept: str) -> str:
    """What a NaN or infinite loss says: the starting weights when they already hold such values before the first
    step (no learning rate is to blame then), else the learning rate; and what the output folder holds (`kept`)."""
    import paddle

    damaged = next((name for name, p in model.named_parameters()
                    if not bool(paddle.isfinite(p).all())), None) if step == 0 else None
    if damaged:
        cause = f"the starting weights hold NaN or infinite values ({damaged}): the model given is damaged"
    else:
        cause = f"lower --lr{' or train without --amp' if precision != 'fp32' else ''}"
    return f"loss became {value} at epoch {epoch}, step {step + 1} ({precision}); {cause}. {kept[:1].upper()}{kept[1:]}"
