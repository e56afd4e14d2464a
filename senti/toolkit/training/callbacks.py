"""A run's cadence as callbacks, as transformers' `TrainerCallback` and `TrainerControl`: the step loop in
`training.run.Run` only steps; each callback watches one concern (a signal, the time budget, when to evaluate, when
to save, when to stop early, the progress bar, the step records) and answers by setting flags on the `Control`,
which the loop acts on: `evaluate` and `save` fire `on_evaluate` and `on_save` on every callback, `stop` ends the
run after this step.

Events, in the order the loop fires them: `on_train_begin` (the optimizer exists; a resumed run sets `run.step`),
after each step `on_step_end`, after each epoch `on_epoch_end` and then `on_epoch_record` (the epoch's evaluation
done), when a flag asks `on_evaluate` / `on_save`, and `on_train_end`. Callbacks fire in list order: the run puts
`Interruption` first, so the others see `control.stop` already set by a signal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from senti.core import stopping
from senti.toolkit.training.collective import agree
from senti.toolkit.training.loop import BudgetPlan

# The run (training.run.Run, which imports this module), its Step and EpochStats, are typed Any here.
Run: TypeAlias = Any
Step: TypeAlias = Any
EpochStats: TypeAlias = Any


@dataclass
class Control:
    """What the callbacks ask of the loop after a step or an epoch. `last` is the loop's: no step follows this one
    (the run's planned steps are done or `stop` is set)."""

    evaluate: bool = False
    save: bool = False
    stop: bool = False
    planned_end: bool = False

    @property
    def last(self) -> bool:
        return self.stop or self.planned_end


class Callback:
    """One concern of a run's cadence; each event may read the run and set flags on `control`."""

    def on_train_begin(self, run: Run, control: Control) -> None:
        """The optimizer and schedule exist; a resumed run sets `run.step` here."""

    def on_step_end(self, run: Run, control: Control, step: Step, value: float) -> None:
        """One optimizer step was taken (`run.step` counts it); `value` is its loss."""

    def on_epoch_end(self, run: Run, control: Control, stats: EpochStats) -> None:
        """An epoch ended without an interruption (flags set here are acted on before `on_epoch_record`)."""

    def on_epoch_record(self, run: Run, control: Control, stats: EpochStats) -> None:
        """The epoch's evaluation, if any, is done: what the epoch's record holds."""

    def on_evaluate(self, run: Run, control: Control) -> None:
        """`control.evaluate` was set: the callback that evaluates does, the others read its result."""

    def on_save(self, run: Run, control: Control) -> None:
        """`control.save` was set."""

    def on_train_end(self, run: Run, control: Control) -> None:
        """The loop ended (finished, stopped or interrupted)."""


class Interruption(Callback):
    """SIGINT or SIGTERM (recorded by `core.stopping`, read between steps): the run ends after this step, so no
    step is cut in half."""

    def on_step_end(self, run, control, step, value) -> None:
        if stopping.signal_name():
            control.stop = True


@dataclass
class TimeBudget(Callback):
    """`--max-minutes`: the run ends after the step that reaches the budget (minutes of the runs it resumes
    counted); with `fill`, the schedule is shaped to the budget (`BudgetPlan`). Every worker stops together,
    whether the budget or a signal reached one of them."""

    minutes: float | None
    prior_minutes: float = 0.0
    fill: bool = False

    def plan(self, total_steps: int, warmup: float) -> BudgetPlan | None:
        if self.fill and self.minutes:
            return BudgetPlan(self.minutes * 60, warmup, total_steps)  # a first guess: the epochs asked for
        return None

    def on_step_end(self, run, control, step, value) -> None:
        control.stop = agree(control.stop or run.clock.over(), run.world)


@dataclass
class EvaluationCadence(Callback):
    """An evaluation at each epoch's end, or with `every` every that many steps and at the last step (the steps after
    the last multiple were never scored: a 807-step run evaluated at 300 and 600 and kept step 600's weights),
    unless a signal is stopping the run."""

    every: int | None

    def on_step_end(self, run, control, step, value) -> None:
        every = self.every
        if every and (run.step % every == 0 or (control.last and not stopping.signal_name())):
            control.evaluate = True

    def on_epoch_end(self, run, control, stats) -> None:
        if not self.every:
            control.evaluate = True


@dataclass
class SaveCadence(Callback):
    """A save every `every` steps and at the last step (the main process alone writes)."""

    every: int

    def on_step_end(self, run, control, step, value) -> None:
        if run.main and (run.step % self.every == 0 or control.last):
            control.save = True


@dataclass
class EarlyStopping(Callback):
    """The run stops after `patience` evaluations without improvement (`run.stale` counts them); said, and recorded
    as `stopped_early`, at the epoch's end."""

    patience: int | None

    def exhausted(self, run) -> bool:
        return bool(self.patience) and run.stale >= self.patience

    def on_evaluate(self, run, control) -> None:
        if self.exhausted(run):
            control.stop = True

    def on_epoch_record(self, run, control, stats) -> None:
        if self.exhausted(run):
            run.metrics.stopped_early, control.stop = True, True
            run.say(f"early stop: no dev improvement in {run.stale} evaluations")


@dataclass
class ProgressBar(Callback):
    """A rich progress bar (when the command gives one): the steps done and `describe(run, value)` beside them."""

    describe: Callable[[Any, float], str]  # (the run, the step's loss) -> the words beside the bar

    def on_train_begin(self, run, control) -> None:
        self.task = None
        if run.progress is not None:
            self.task = run.progress.add_task(run.task_name, total=None if run.plan else run.total,
                                              completed=run.step)

    def on_step_end(self, run, control, step, value) -> None:
        if self.task is not None:
            run.progress.update(self.task, completed=run.step, description=self.describe(run, value))

    def on_train_end(self, run, control) -> None:
        if self.task is not None:
            run.progress.remove_task(self.task)
