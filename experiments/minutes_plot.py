"""Dev accuracy after fine-tuning against minutes of pretraining, from finished runs, with the n-gram baseline.

    python -m experiments.minutes_plot --point 0:runs/s5/scratch-256-e8b \\
        --point 25:runs/s5/D-256-e8 --point 102:runs/s5/P2-256-e8 --output docs/img/pretrain-minutes.png

Each point is MINUTES:CHECKPOINT (a `senti train` output); its best dev accuracy and the baseline's come from its
metrics.json. (`pretrain_curve` fine-tunes every snapshot itself; this one plots runs already made.)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--point", action="append", required=True, help="MINUTES:CHECKPOINT")
    parser.add_argument("--output", type=Path, required=True)
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from senti.core import layout

    points, baseline = [], None
    for spec in args.point:
        minutes, folder = spec.split(":", 1)
        metrics = json.loads((Path(folder) / layout.METRICS).read_text(encoding="utf-8"))
        points.append((float(minutes), metrics["best"]["dev_accuracy"], Path(folder).name))
        baseline = metrics.get("baseline", {}).get("dev", {}).get("accuracy", baseline)
    points.sort()
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label="fine-tuned 3l-128h (8 epochs, 256 tokens)")
    for minutes, accuracy, _name in points:
        ax.annotate(f"{accuracy:.4f}", (minutes, accuracy), textcoords="offset points", xytext=(0, 6), ha="center")
    if baseline is not None:
        ax.axhline(baseline, color="grey", linestyle="--", label=f"char n-gram baseline {baseline:.4f}")
    ax.set_xlabel("minutes of senti pretrain (one thread on a shared 2-core CPU)")
    ax.set_ylabel("ChnSentiCorp dev accuracy")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    args.output.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.output, dpi=120)
    print(f"{args.output}: " + ", ".join(f"{m:g} min {a:.4f}" for m, a, _ in points))


if __name__ == "__main__":
    main()
