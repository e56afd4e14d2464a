"""report.md and PNG plots from results.json, and `senti bench compare` across machines."""

from __future__ import annotations

from pathlib import Path

from senti.benchmarks.markdown import number as _f
from senti.benchmarks.markdown import table as _table
from senti.benchmarks.results import BenchResults
from senti.benchmarks.suites import SUITES, suite_module
from senti.core import layout


def _load(folder: Path) -> dict:
    return BenchResults.read(folder).to_json()


def _ceiling_table(ceilings: list[dict]) -> str:
    """One row per runtime and precision, a GFLOP/s column per moment it was timed (start, peer, end)."""
    rows: dict[tuple, dict] = {}
    moments = [m for m in ("start", "peer", "end") if any(c.get("when") == m for c in ceilings)]
    for c in ceilings:
        rows.setdefault((c["runtime"], c["precision"], c["size"]), {})[c["when"]] = c
    return _table(["runtime", "precision", "size", *(f"GFLOP/s ({m})" for m in moments)],
                  [[*key, *(_f(w[m]["matmul_flops_per_s"] / 1e9, 0) if m in w else "—" for m in moments)]
                   for key, w in rows.items()])


def write_report(folder: Path) -> Path:
    folder = Path(folder)
    results = BenchResults.read(folder)
    data = results.to_json()
    env, config, records = data["environment"], data["config"], data["records"]
    by = lambda suite: [r for r in records if r["suite"] == suite]  # noqa: E731
    parts = [f"# senti bench: {config['model']} on {env.get('gpu') or env.get('cpu_model')}",
             "", f"Command: `senti bench --target {config['target']} --suite {config['suite']} --model "
                 f"{config['model']} --dataset {config['dataset']} --batch-sizes "
                 f"{','.join(map(str, config['batch_sizes']))}{' --quick' if config['quick'] else ''}"
                 f"{' --seq-len ' + str(config['seq_len']) if config.get('seq_len') else ''} "
                 f"--output-dir {folder}`",
             "", f"Machine: {env.get('cpu_model')} ({env.get('cores')} cores, {env.get('memory_gib', '?')} GiB; "
                 f"flags {', '.join(env.get('cpu_flags') or []) or 'none recorded'}), "
                 f"{env.get('gpu') or 'no GPU'}; threads {env.get('omp_num_threads')}, "
                 f"MKL_DEBUG_CPU_TYPE={env.get('mkl_debug_cpu_type')}; "
                 f"paddle {env.get('paddlepaddle') or env.get('paddlepaddle-gpu')}, "
                 f"onnxruntime {env.get('onnxruntime') or env.get('onnxruntime-gpu')}. Started {data['started']}.", ""]
    if data.get("wall_seconds"):
        spent = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in data.get("suite_seconds", {}).items())
        parts += [f"Whole run {data['wall_seconds'] / 60:.1f} min ({spent}; the rest is model set-up, export "
                  "and the ceiling).", ""]
    if by("ceiling"):
        parts += ["## Ceiling", "", "The best square matmul each runtime reached (best of 5 after warm-up), timed at "
                  "the start and the end of the run (PyTorch's while the peer runs); each result below is a "
                  "fraction of the fastest one of its precision.", "", _ceiling_table(by("ceiling"))]
    beaten = [r for r in records if r.get("beats_ceiling")]
    if beaten:
        parts += ["", f"**{len(beaten)} result(s) beat their ceiling: the FLOP count is wrong for them.**"]

    for name in SUITES:  # each suite writes its own section
        if by(name):
            parts += suite_module(name).report(results)
    _plots(folder, records)
    parts += ["", "Plots: `throughput.png` (training samples/s against batch size), `latency.png` "
                  "(inference latency percentiles by backend).", ""]
    path = folder / layout.BENCH_REPORT
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _plots(folder: Path, records: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in records if r["suite"] == "train" and not r.get("oom")]
    if train:
        fig, ax = plt.subplots(figsize=(6, 4))
        for key in sorted({(r["mode"], r["precision"]) for r in train}):
            pts = sorted((r["batch_size"], r["samples_per_s"]) for r in train if (r["mode"], r["precision"]) == key)
            ax.plot(*zip(*pts), "o-", label=" ".join(key))
        ax.set(xlabel="batch size", ylabel="training samples/s", title="training throughput", xscale="log")
        ax.legend()
        fig.tight_layout()
        fig.savefig(folder / layout.BENCH_PLOTS[0], dpi=100)
        plt.close(fig)
    infer = [r for r in records if r["suite"] == "infer"]
    if infer:  # one bar group per backend and batch size
        fig, ax = plt.subplots(figsize=(8, 4))
        names = [f"{r['backend']}\nb{r['batch_size']}" for r in infer]
        x = range(len(infer))
        for i, pct in enumerate(("p50", "p95", "p99")):
            ax.bar([v + (i - 1) * 0.27 for v in x], [r["latency_ms"][pct] for r in infer], width=0.27, label=pct)
        ax.set_xticks(list(x), names, fontsize=7)
        ax.set(ylabel="ms per model call", title="inference latency by backend", yscale="log")
        ax.legend()
        fig.tight_layout()
        fig.savefig(folder / layout.BENCH_PLOTS[1], dpi=100)
        plt.close(fig)


def compare(folders: list[Path], prices: dict[str, float]) -> str:
    """One table of training seconds per epoch across runs, speed-up against the first, cost per epoch."""
    runs = [(Path(f), _load(f)) for f in folders]
    keys = []
    for _, data in runs:
        for r in data["records"]:
            if r["suite"] == "train" and not r.get("oom"):
                key = (r["mode"], r["precision"], r["batch_size"])
                if key not in keys:
                    keys.append(key)
    header = ["mode", "precision", "batch"]
    for folder, _data in runs:
        label = folder.name
        header += [f"{label} s/epoch", f"{label} speed-up"] + ([f"{label} $/epoch"] if label in prices else [])
    rows = []
    for key in keys:
        row, base = list(key), None
        for folder, _data in runs:
            match = next((r for r in data["records"] if r["suite"] == "train" and not r.get("oom")
                          and (r["mode"], r["precision"], r["batch_size"]) == key), None)
            seconds = match["seconds_per_epoch"] if match else None
            base = base if base is not None else seconds
            row += [_f(seconds), f"{base / seconds:.2f}x" if seconds and base else "—"]
            if folder.name in prices:
                row.append(f"{prices[folder.name] * seconds / 3600:.4f}" if seconds else "—")
        rows.append(row)
    machines = "; ".join(f"{f.name}: {d['environment'].get('gpu') or d['environment'].get('cpu_model')}"
                         for f, d in runs)
    return f"Machines: {machines}\n\n" + _table(header, rows) + "\n"
