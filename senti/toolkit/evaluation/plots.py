"""What `senti eval` draws beside its figures: the reliability diagram (is a 0.9 right nine times in ten?) and the
risk-coverage curve (how often the answers kept are wrong, as the least confident are handed to people)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from senti.core.calibration import BINS, expected_calibration_error, reliability_bins, risk_coverage


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    tmp = Path(path).with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and CI
    import matplotlib.pyplot as plt

    return plt


def plot_reliability(scored: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], path: Path,
                     calibrated: bool) -> None:
    """`calibration.png`: per group (a domain, or the one split), the mean confidence of each equal-mass bin against
    how often its answers were right (one set: the plain softmax dashed beside the calibrated answers; several: the
    answers as given); under it, the texts per confidence of the first group. `scored`: name -> (plain softmax,
    calibrated probabilities, gold ids)."""
    plt = _pyplot()
    fig, (ax, counts) = plt.subplots(2, 1, figsize=(6.4, 7.2), gridspec_kw={"height_ratios": [3, 1]}, sharex=True)
    ax.plot([0, 1], [0, 1], color="grey", linestyle=":", label="perfectly calibrated")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (name, (raw, probs, gold)) in enumerate(scored.items()):
        color = colors[k % len(colors)]
        prefix = f"{name}: " if len(scored) > 1 and name else ""
        # one set: the softmax beside the calibrated answers; several: the answers as given, one line each
        sides = [("softmax", raw, "--")] if not calibrated or len(scored) == 1 else []
        sides += [("calibrated", probs, "-")] if calibrated else []
        for what, p, style in sides:
            table = reliability_bins(p, gold)
            ax.plot([b.confidence for b in table], [b.accuracy for b in table], style, marker="o", markersize=3,
                    color=color, label=f"{prefix}{what} (ECE {expected_calibration_error(p, gold):.3f})")
    ax.set(ylabel="accuracy in the bin", xlim=(0, 1), ylim=(0, 1.02),
           title=f"reliability ({BINS} equal-mass bins per set)")
    ax.legend(fontsize=7, loc="upper left")
    name, (raw, probs, gold) = next(iter(scored.items()))
    shown = probs if calibrated else raw
    edges = np.linspace(0, 1, BINS + 1)
    counts.hist(shown.max(1), bins=edges, color=colors[0], alpha=0.7)
    counts.set(xlabel="confidence (probability of the answer)", ylabel="texts",
               title=f"texts per confidence ({name or 'scored set'}, {'calibrated' if calibrated else 'softmax'})")
    fig.tight_layout()
    _save(fig, path)


def plot_risk_coverage(scored: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], path: Path) -> None:
    """`risk_coverage.png`: per group, the error rate of the answers kept as the least confident are set aside."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for name, (_, probs, gold) in scored.items():
        coverage, risk = risk_coverage(probs, gold)
        ax.plot(coverage, risk, label=f"{name or 'scored set'} (AURC {risk.mean():.4f})")
    ax.set(xlabel="coverage (share of texts answered, most confident first)", ylabel="error rate of those answered",
           xlim=(0, 1), ylim=(0, None), title="risk-coverage")
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save(fig, path)
