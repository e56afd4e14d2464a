"""Dev accuracy after fine-tuning against minutes of pretraining: one fine-tune per snapshot of a `senti pretrain
--snapshots` folder, plotted with the n-gram baseline as a line.

    python -m experiments.pretrain_curve --pretrained runs/pt/A --dataset ../shared/data/chnsenticorp \
        --output runs/curve [--epochs 1] [--lr 2e-4] [--every 2] [--threads 1]

Writes OUTPUT/curve.json (one record per snapshot: step, pretraining minutes, dev accuracy) and curve.png.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pretrained", type=Path, required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--every", type=int, default=1, help="use every Nth snapshot")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--from-scratch-shape", default="3l-128h", help="the point at 0 minutes: random weights")
    args = parser.parse_args()

    from senti.core import layout
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    snapshots = sorted((args.pretrained / "snapshots").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    points = [(0, 0.0, f"scratch:{args.from_scratch_shape}")] + [
        (int(s.name.split("-")[1]),
         json.loads((s / layout.CHECKPOINT_META).read_text(encoding="utf-8"))["elapsed_minutes"], str(s))
        for s in snapshots[args.every - 1::args.every]]
    args.output.mkdir(parents=True, exist_ok=True)
    out_file = args.output / "curve.json"
    records = json.loads(out_file.read_text(encoding="utf-8")) if out_file.is_file() else []
    done = {r["step"] for r in records}
    for step, minutes, model in points:
        if step in done:
            continue
        metrics = run_training(TrainConfig(model=model, dataset=args.dataset, output_dir=str(args.output / f"ft-{step}"),
                                           epochs=args.epochs, lr=args.lr if step else 5e-4, seed=args.seed,
                                           threads=args.threads, overwrite=True, baseline=not records),
                               say=lambda _: None)
        dev = metrics.baseline.dev if metrics.baseline else None
        baseline = dev.accuracy if dev else records[0]["baseline_dev_accuracy"]
        assert metrics.best is not None
        records.append({"step": step, "pretraining_minutes": minutes, "model": model,
                        "dev_accuracy": metrics.best.dev_accuracy, "baseline_dev_accuracy": baseline,
                        "epochs": args.epochs, "lr": args.lr if step else 5e-4})
        out_file.write_text(json.dumps(records, indent=2), encoding="utf-8")
        print(json.dumps(records[-1]), flush=True)
    _plot(records, args.output / "curve.png")


def _plot(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = sorted(records, key=lambda r: r["pretraining_minutes"])
    fig, ax = plt.subplots(figsize=(6, 3.8))
    ax.plot([r["pretraining_minutes"] for r in records], [r["dev_accuracy"] for r in records], "o-",
            label=f"fine-tuned, {records[0]['epochs']} epoch(s)")
    ax.axhline(records[0]["baseline_dev_accuracy"], color="grey", linestyle=":", label="char n-gram baseline")
    ax.set(xlabel="pretraining minutes (2 CPU cores shared)", ylabel="dev accuracy",
           title="ChnSentiCorp dev accuracy against pretraining time")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
