"""The n-gram refit with the new labels counting more: a lever for a few labels of a new shop, measured on the picks
an `experiments.far_domains` run (`--budget 2N --dev-random N`) wrote.

The refit beside every few-labels figure fits the baseline on the old training split plus the new labels, each row
counting once, so 64 new rows weigh little against 9,600 old ones. Here the new rows count `w` times (the
logistic regression's sample weights), for each weight asked, on the same picks, scored on each domain's test split.

    python -m experiments.weighted_refit --report runs/few32 --old chnsenticorp/ --root shop/ --weights 1,3,10,30
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import numpy as np

from experiments.far_domains import baseline_accuracy


def measure(report_dir: Path, old_dataset: str, root: str, weights: list[float]) -> dict:
    """{domain: {"parent": test accuracy, "runs": [{seed: ..., weight: accuracy, ...}]}} over the report's picks."""
    from senti.toolkit.data.splits import load_splits, read_table

    report = json.loads((report_dir / "report.json").read_text(encoding="utf-8"))
    old = load_splits(old_dataset)
    labels = old.labels
    out: dict = {}
    for domain, entry in report["domains"].items():
        test = load_splits(str(Path(root) / domain)).split("test")
        runs = []
        for run in entry["runs"]:
            data = report_dir / f"{domain}-{run['strategy']}-{run['seed']}-data"
            new = read_table(data / "train.tsv") + read_table(data / "dev.tsv")
            rows = old.train + new
            scored = {str(w): baseline_accuracy(rows, test, labels, np.r_[np.ones(len(old.train)), np.full(len(new), w)])
                      for w in weights}
            runs.append({"seed": run["seed"], **scored})
            print(json.dumps({"domain": domain, **runs[-1]}), flush=True)
        out[domain] = {"parent": entry["before"]["test"], "test_texts": len(test), "runs": runs}
    return out


def table(results: dict, weights: list[float]) -> list[str]:
    """Per domain the parent and each weight's median over seeds; then per weight the median gain over the parent,
    the worst run against it, and on how many domains the median is above the plain refit's (weight 1)."""
    names = [str(w) for w in weights]
    lines = ["| domain (test texts) | parent | " + " | ".join(f"new labels x{w:g} (median)" for w in weights) + " |",
             "|" + "---|" * (2 + len(weights))]
    gains: dict[str, list[float]] = {n: [] for n in names}
    worst: dict[str, list[float]] = {n: [] for n in names}
    above: dict[str, int] = dict.fromkeys(names, 0)
    for domain, entry in results.items():
        medians = {n: statistics.median(r[n] for r in entry["runs"]) for n in names}
        lines.append(f"| {domain} ({entry['test_texts']:,}) | {entry['parent']:.3f} | "
                     + " | ".join(f"{medians[n]:.3f}" for n in names) + " |")
        for n in names:
            gains[n].append(medians[n] - entry["parent"])
            worst[n].append(min(r[n] for r in entry["runs"]) - entry["parent"])
            above[n] += medians[n] > medians[names[0]]
    lines.append("")
    for n in names:
        lines.append(f"x{float(n):g}: median - parent {100 * statistics.median(gains[n]):+.1f} points, worst run "
                     f"{100 * min(worst[n]):+.1f}, median above the plain refit (x{weights[0]:g}) on {above[n]} of "
                     f"{len(results)} domains")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, required=True, help="an experiments.far_domains output folder")
    parser.add_argument("--old", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--weights", default="1,3,10,30")
    args = parser.parse_args(argv)
    weights = [float(w) for w in args.weights.split(",")]
    print("\n".join(table(measure(args.report, args.old, args.root, weights), weights)))


if __name__ == "__main__":
    main()
