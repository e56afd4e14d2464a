"""The few-labels table of the far-domains page from `experiments.far_domains --unlabeled-arm`'s report.json:
per domain the parent, the child of the defaults and the child with `--unlabeled` (each seed, the median and its
difference to the parent), and the n-gram refit with the same labels; then the summary lines.

    python -m experiments.few_labels_table runs/few32/report.json
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def table(report: dict) -> list[str]:
    lines = ["| domain (test texts) | parent | child, seeds 1, 2, 3 | median - parent | with --unlabeled, seeds 1, 2, 3 "
             "| median - parent | refit, same labels (median) | child - refit (medians) |",
             "|---|---|---|---|---|---|---|---|"]
    summary: dict[str, list[float]] = {"child": [], "pool": [], "worst_child": [], "worst_pool": [], "vs_refit": []}
    for domain, entry in report["domains"].items():
        runs = entry["runs"]
        parent = entry["before"]["test"]
        child = [r["after"]["test"] for r in runs]
        pool = [r["with_unlabeled"]["after"]["test"] for r in runs if "with_unlabeled" in r]
        refit = statistics.median(r["baseline_refit"]["test"] for r in runs)

        def cell(values, kept):
            return ", ".join(f"{v:.3f}{'*' if k else ''}" for v, k in zip(values, kept))

        lines.append(
            f"| {domain} ({entry['texts']['test']:,}) | {parent:.3f} "
            f"| {cell(child, [r['kept_parent'] for r in runs])} | {_points(statistics.median(child) - parent)} "
            f"| {cell(pool, [r['with_unlabeled']['kept_parent'] for r in runs if 'with_unlabeled' in r])} "
            f"| {_points(statistics.median(pool) - parent) if pool else '-'} | {refit:.3f} "
            f"| {_points(statistics.median(child) - refit)} |")
        summary["child"].append(statistics.median(child) - parent)
        summary["worst_child"].append(min(child) - parent)
        summary["vs_refit"].append(statistics.median(child) - refit)
        if pool:
            summary["pool"].append(statistics.median(pool) - parent)
            summary["worst_pool"].append(min(pool) - parent)
    lines += ["", "(* the parent's weights were kept.)", "",
              f"Child - parent, median over domains of the per-domain medians: {_points(statistics.median(summary['child']))}"
              f" points (with --unlabeled: {_points(statistics.median(summary['pool'])) if summary['pool'] else '-'}); "
              f"worst single run: {_points(min(summary['worst_child']))} "
              f"(with --unlabeled: {_points(min(summary['worst_pool'])) if summary['worst_pool'] else '-'}); "
              f"domains where the child's median is above the refit: "
              f"{sum(d > 0 for d in summary['vs_refit'])} of {len(summary['vs_refit'])}."]
    return lines


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    print("\n".join(table(report)))


if __name__ == "__main__":
    main()
