"""The few-labels tables of the far-domains page from `experiments.far_domains`' report.json: per domain the parent,
the child of the defaults and the child of each arm (`--unlabeled-arm`, `--arm NAME=VALUE`: each seed, the median
and its difference to the parent), and the n-gram refit with the same labels; then the summary lines.

    python -m experiments.few_labels_table runs/few32/report.json [--defaults runs/earlier/report.json] [--split dev]

With --defaults, the defaults' children come from an earlier report of the same domains, seeds and picks (a run made
with --arms-only). --split dev reads the domains' dev splits (where a report scored them: `--after dev,test`), the
split an arm's setting is chosen on; test is the default.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path


def _points(x: float) -> str:
    return f"{100 * x:+.1f}"


def _arms(report: dict) -> list[str]:
    """The arms a report holds, in the order first met: `--unlabeled` (the legacy key) and each `--arm`."""
    names: dict[str, None] = {}
    for entry in report["domains"].values():
        for run in entry["runs"]:
            if "with_unlabeled" in run:
                names["--unlabeled"] = None
            names.update(dict.fromkeys(run.get("arms", {})))
    return list(names)


def _arm(run: dict, name: str) -> dict | None:
    return run.get("with_unlabeled") if name == "--unlabeled" else run.get("arms", {}).get(name)


def _cell(results: list[dict], split: str) -> str:
    """Each seed's accuracy on `split`; * where the parent's weights were kept, b where a parent-child blend was."""
    return ", ".join(f"{r['after'][split]:.3f}{'*' if r['kept_parent'] else ''}{'b' if r.get('kept_blend') else ''}"
                     for r in results)


def table(report: dict, defaults: dict | None = None, split: str = "test") -> list[str]:
    arms = _arms(report)
    with_child = defaults is not None or all("after" in r for e in report["domains"].values() for r in e["runs"])
    head = [f"domain ({split} texts)", "parent"] + (["child, seeds 1, 2, 3", "median - parent"] if with_child else [])
    for name in arms:
        head += [f"{name}, seeds 1, 2, 3", "median - parent"]
    head += ["refit, same labels (median)"] + (["child - refit (medians)"] if with_child else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    gains: dict[str, list[float]] = {name: [] for name in ["child", *arms]}
    worst: dict[str, list[float]] = {name: [] for name in ["child", *arms]}
    above_refit: dict[str, int] = {name: 0 for name in ["child", *arms]}
    for domain, entry in report["domains"].items():
        runs = entry["runs"]
        parent = entry["before"][split]
        children = [r if "after" in r else _same_run(defaults, domain, r) for r in runs] if with_child else []
        refit = statistics.median(r["baseline_refit"][split] for r in runs)
        row = [f"{domain} ({entry['texts'][split]:,})", f"{parent:.3f}"]
        columns: list[tuple[str, list[dict | None]]] = [("child", list(children))] if with_child else []
        columns += [(a, [_arm(r, a) for r in runs]) for a in arms]
        for name, found in columns:
            results = [r for r in found if r is not None]
            figures = [r["after"][split] for r in results]
            row += [_cell(results, split), _points(statistics.median(figures) - parent) if figures else "-"]
            if figures:
                gains[name].append(statistics.median(figures) - parent)
                worst[name].append(min(figures) - parent)
                above_refit[name] += statistics.median(figures) > refit
        versus = [_points(statistics.median(r["after"][split] for r in children) - refit)] if with_child else []
        lines.append("| " + " | ".join([*row, f"{refit:.3f}", *versus]) + " |")
    lines += ["", "(* the parent's weights were kept; b a parent-child blend was.)", ""]
    for name in ["child", *arms]:
        if gains[name]:
            lines.append(f"{'Child' if name == 'child' else name} - parent, median over domains of the per-domain "
                         f"medians: {_points(statistics.median(gains[name]))} points; worst single run: "
                         f"{_points(min(worst[name]))}; median above the refit on {above_refit[name]} of "
                         f"{len(gains[name])} domains.")
    return lines


def _same_run(defaults: dict | None, domain: str, run: dict) -> dict:
    """The defaults' run of the same domain, strategy and seed in an earlier report."""
    if defaults is None:
        raise SystemExit(f"{domain}: the report has no defaults' runs (made with --arms-only); give --defaults")
    for other in defaults["domains"][domain]["runs"]:
        if (other["strategy"], other["seed"]) == (run["strategy"], run["seed"]):
            return other
    raise SystemExit(f"{domain}: no run of seed {run['seed']} in the --defaults report")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    parser.add_argument("--defaults", type=Path, default=None)
    parser.add_argument("--split", choices=("dev", "test"), default="test")
    args = parser.parse_args()
    report = json.loads(args.report.read_text(encoding="utf-8"))
    defaults = json.loads(args.defaults.read_text(encoding="utf-8")) if args.defaults else None
    print("\n".join(table(report, defaults, args.split)))


if __name__ == "__main__":
    main()
