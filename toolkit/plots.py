"""Training curves as a PNG: people read a loss curve faster than a table of numbers."""

from __future__ import annotations

from pathlib import Path


def plot_training_curves(metrics: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and CI
    import matplotlib.pyplot as plt
    import numpy as np

    losses = np.asarray(metrics["step_losses"], dtype=float)
    evals = metrics["evaluations"]
    fig, (ax_loss, ax_dev) = plt.subplots(1, 2, figsize=(10, 3.8))
    if len(losses):
        ax_loss.plot(np.arange(1, len(losses) + 1), losses, alpha=0.3, label="step")
        window = max(1, len(losses) // 20)
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax_loss.plot(np.arange(window, len(losses) + 1), smooth, label=f"mean of {window}")
        ax_loss.legend()
    ax_loss.set(title="train loss", xlabel="step", ylabel="cross-entropy")
    if evals:
        steps = [e["step"] for e in evals]
        ax_dev.plot(steps, [e["dev_accuracy"] for e in evals], "o-", label="accuracy")
        ax_dev.plot(steps, [e["dev_macro_f1"] for e in evals], "s--", label="macro-F1")
        ax_dev.legend()
    ax_dev.set(title="dev", xlabel="step", ylim=(0, 1))
    fig.suptitle(f"{metrics['model'].get('preset') or metrics['model'].get('name', '')} "
                 f"on {metrics['device']} ({metrics['precision']})")
    fig.tight_layout()
    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
