"""Training curves as a PNG: people read a loss curve faster than a table of numbers."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from senti.toolkit.records import PretrainMetrics, TrainingMetrics


def plot_training_curves(metrics: TrainingMetrics, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and CI
    import matplotlib.pyplot as plt
    import numpy as np

    losses = np.asarray(metrics.step_losses, dtype=float)
    evals = metrics.evaluations
    fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=(10, 3.8))
    if len(losses):
        ax_loss.plot(np.arange(1, len(losses) + 1), losses, alpha=0.3, label="step")
        window = max(1, len(losses) // 20)
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax_loss.plot(np.arange(window, len(losses) + 1), smooth, label=f"mean of {window}")
        ax_loss.legend()
    ax_loss.set(title="train loss", xlabel="step", ylabel="cross-entropy")
    if evals:
        steps = [e.step for e in evals]
        ax_dev.plot(steps, [e.dev_accuracy for e in evals], "o-", label="accuracy")
        ax_dev.plot(steps, [e.dev_macro_f1 for e in evals], "s--", label="macro-F1")
    baseline = metrics.baseline.dev if metrics.baseline else None
    if baseline:
        ax_dev.axhline(baseline.accuracy, color="grey", linestyle=":", label=f"n-gram baseline {baseline.accuracy:.3f}")
    if evals or baseline:
        ax_dev.legend()
    ax_dev.set(title="dev", xlabel="step", ylim=(0, 1))
    fig.suptitle(f"{metrics.model.preset or metrics.model.name or ''} "
                 f"on {metrics.device} ({metrics.precision})")
    fig.tight_layout()
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def plot_pretraining_curves(metrics: PretrainMetrics, path: Path) -> None:
    """MLM loss per step, and the held-out loss and masked-token accuracy at each save."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    losses = np.asarray([s.loss for s in metrics.steps], dtype=float)
    evals = metrics.evaluations
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.8))
    if len(losses):
        ax_loss.plot(np.arange(1, len(losses) + 1), losses, alpha=0.3, label="train step")
        window = max(1, len(losses) // 20)
        ax_loss.plot(np.arange(window, len(losses) + 1), np.convolve(losses, np.ones(window) / window, "valid"),
                     label=f"mean of {window}")
    if evals:
        ax_loss.plot([e.step for e in evals], [e.mlm_loss for e in evals], "o-", label="held-out")
        ax_acc.plot([e.step for e in evals], [e.masked_accuracy for e in evals], "o-")
    ax_loss.legend()
    ax_loss.set(title="masked-LM loss", xlabel="step", ylabel="cross-entropy")
    ax_acc.set(title="held-out masked-token accuracy", xlabel="step", ylim=(0, 1))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
