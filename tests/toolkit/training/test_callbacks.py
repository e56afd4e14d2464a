"""The run loop's cadence as callbacks: each sets flags on a Control; the Run's hooks are few and documented."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

from senti.toolkit.training import callbacks as cb
from senti.toolkit.training.distill import DistillRun
from senti.toolkit.training.pretrain import PretrainRun
from senti.toolkit.training.run import ClassifierRun, Run, _act
from senti.toolkit.training.train import TrainRun

ROOT = Path(__file__).resolve().parents[3]


def _fake_run(step: int = 0, main: bool = True, stale: int = 0):
    said: list[str] = []
    return SimpleNamespace(step=step, main=main, stale=stale, metrics=SimpleNamespace(stopped_early=False),
                           say=said.append, said=said)


def _answered_hooks() -> set[str]:
    """The methods Run defines that a subclass of it (in senti) defines again."""
    base = {name for name, value in vars(Run).items() if inspect.isfunction(value) and not name.startswith("_")}
    answered: set[str] = set()
    for sub in (ClassifierRun, TrainRun, DistillRun, PretrainRun):
        answered |= base & {name for name, value in vars(sub).items() if inspect.isfunction(value)}
    return answered


def test_run_has_at_most_eight_hooks_and_the_architecture_lists_them():
    hooks = _answered_hooks()
    assert len(hooks) <= 8, sorted(hooks)
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    line = re.search(r"^Run {2,}(.+)$", text, re.M)
    assert line is not None
    listed = {w.split()[0] for w in line.group(1).split(", ")}
    assert hooks <= listed and len(listed) <= 8, (sorted(hooks), sorted(listed))
    for name in ("Interruption", "TimeBudget", "EvaluationCadence", "SaveCadence", "EarlyStopping", "ProgressBar"):
        assert name in text and isinstance(getattr(cb, name), type)


def test_evaluation_cadence_every_n_steps_and_at_the_last_step_not_when_a_signal_stops():
    cadence = cb.EvaluationCadence(every=3)
    due = []
    for step in range(1, 9):
        control = cb.Control(planned_end=step == 8)
        cadence.on_step_end(_fake_run(step), control, None, 0.0)
        due.append(control.evaluate)
    assert [s for s, d in zip(range(1, 9), due, strict=True) if d] == [3, 6, 8]
    by_epoch = cb.Control()
    cadence_by_epoch = cb.EvaluationCadence(every=None)
    cadence_by_epoch.on_step_end(_fake_run(3), by_epoch, None, 0.0)
    assert not by_epoch.evaluate
    cadence_by_epoch.on_epoch_end(_fake_run(3), by_epoch, None)
    assert by_epoch.evaluate


def test_evaluation_cadence_skips_the_last_step_of_an_interrupted_run(monkeypatch):
    from senti.core import stopping

    monkeypatch.setattr(stopping, "signal_name", lambda: "SIGTERM")
    control = cb.Control(stop=True)
    cb.EvaluationCadence(every=3).on_step_end(_fake_run(4), control, None, 0.0)
    assert not control.evaluate


def test_early_stopping_stops_after_patience_and_says_so_at_the_epoch_record():
    stopper = cb.EarlyStopping(patience=2)
    run, control = _fake_run(stale=1), cb.Control()
    stopper.on_evaluate(run, control)
    stopper.on_epoch_record(run, control, None)
    assert not control.stop and not run.metrics.stopped_early and not run.said
    run.stale = 2
    stopper.on_evaluate(run, control)
    assert control.stop and not run.metrics.stopped_early
    stopper.on_epoch_record(run, control, None)
    assert run.metrics.stopped_early and run.said == ["early stop: no dev improvement in 2 evaluations"]
    off, run_off = cb.Control(), _fake_run(stale=50)
    cb.EarlyStopping(patience=None).on_evaluate(run_off, off)
    assert not off.stop


def test_save_cadence_saves_on_the_main_process_every_n_steps_and_last():
    saver = cb.SaveCadence(every=5)
    saves = []
    for step, stop in ((4, False), (5, False), (6, False), (7, True)):
        control = cb.Control(stop=stop)
        saver.on_step_end(_fake_run(step), control, None, 0.0)
        saves.append(control.save)
    assert saves == [False, True, False, True]
    worker = cb.Control(stop=True)
    saver.on_step_end(_fake_run(10, main=False), worker, None, 0.0)
    assert not worker.save


def test_the_time_budget_stops_every_worker_and_shapes_the_schedule_only_when_asked():
    run = SimpleNamespace(world=1, clock=SimpleNamespace(over=lambda: True))
    control = cb.Control()
    cb.TimeBudget(minutes=1.0).on_step_end(run, control, None, 0.0)
    assert control.stop
    assert cb.TimeBudget(minutes=1.0).plan(100, 0.1) is None
    plan = cb.TimeBudget(minutes=1.0, fill=True).plan(100, 0.1)
    assert plan is not None and plan.total == 100 and plan.budget_s == 60
    assert cb.TimeBudget(minutes=None, fill=True).plan(100, 0.1) is None


def test_flags_fire_evaluate_then_save_to_every_callback_and_are_cleared():
    events: list[str] = []

    class Watch(cb.Callback):
        def __init__(self, name):
            self.name = name

        def on_evaluate(self, run, control):
            events.append(f"{self.name}:evaluate")

        def on_save(self, run, control):
            events.append(f"{self.name}:save")

    control = cb.Control(evaluate=True, save=True)
    _act([Watch("a"), Watch("b")], _fake_run(), control)
    assert events == ["a:evaluate", "b:evaluate", "a:save", "b:save"]
    assert not control.evaluate and not control.save
    _act([Watch("a")], _fake_run(), control)
    assert len(events) == 4
