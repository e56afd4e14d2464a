"""Summarize recipe.sh's runs: best dev accuracy, test accuracy (eval_test.json), baseline, wall minutes.

    python -m experiments.recipe_table runs/recipe
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def rows(root: Path):
    for run in sorted(p for p in root.iterdir() if (p / "metrics.json").is_file()):
        metrics = json.loads((run / "metrics.json").read_text(encoding="utf-8"))
        test = run / "eval_test.json"
        distill = run / "distill.json"
        test_acc = json.loads(test.read_text(encoding="utf-8"))["accuracy"] if test.is_file() else None
        if test_acc is None and distill.is_file():
            test_acc = json.loads(distill.read_text(encoding="utf-8"))["student"].get("test_accuracy")
        best = metrics.get("best") or {}
        base = (metrics.get("baseline") or {}).get("dev", {}).get("accuracy")
        minutes = sum(e["wall_seconds"] for e in metrics.get("epochs", [])) / 60
        yield run.name, best.get("dev_accuracy"), test_acc, base, minutes


def main() -> None:
    root = Path(sys.argv[1])
    print("| run | dev accuracy | test accuracy | baseline dev | training minutes |")
    print("|---|---|---|---|---|")
    for name, dev, test, base, minutes in rows(root):
        fmt = lambda x: f"{x:.4f}" if isinstance(x, float) else "—"  # noqa: E731
        print(f"| {name} | {fmt(dev)} | {fmt(test)} | {fmt(base)} | {minutes:.1f} |")


if __name__ == "__main__":
    main()
