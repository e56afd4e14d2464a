"""report.md and PNG plots from results.json, and `senti bench compare` across machines."""

from __future__ import annotations

import json
from pathlib import Path


def _load(folder: Path) -> dict:
    return json.loads((Path(folder) / "results.json").read_text(encoding="utf-8"))


def _table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _f(x, digits=1):
    return "—" if x is None else f"{x:,.{digits}f}"


def _share(record: dict) -> str:
    """fraction_of_ceiling as a percentage, flagged when it beats the ceiling (set at the end of a run)."""
    if record.get("fraction_of_ceiling") is None:
        return "—"
    return f"{record['fraction_of_ceiling']:.1%}" + (" (!)" if record.get("beats_ceiling") else "")


def _ceiling_table(ceilings: list[dict]) -> str:
    """One row per runtime and precision, a GFLOP/s column per moment it was timed (start, peer, end)."""
    rows, moments = {}, [m for m in ("start", "peer", "end") if any(c.get("when") == m for c in ceilings)]
    for c in ceilings:
        rows.setdefault((c["runtime"], c["precision"], c["size"]), {})[c["when"]] = c
    return _table(["runtime", "precision", "size", *(f"GFLOP/s ({m})" for m in moments)],
                  [[*key, *(_f(w[m]["matmul_flops_per_s"] / 1e9, 0) if m in w else "—" for m in moments)]
                   for key, w in rows.items()])


def write_report(folder: Path) -> Path:
    folder = Path(folder)
    data = _load(folder)
    env, config, records = data["environment"], data["config"], data["records"]
    by = lambda suite: [r for r in records if r["suite"] == suite]  # noqa: E731
    parts = [f"# senti bench: {config['model']} on {env.get('gpu') or env.get('cpu_model')}",
             "", f"Command: `senti bench --target {config['target']} --suite {config['suite']} --model "
                 f"{config['model']} --dataset {config['dataset']} --batch-sizes "
                 f"{','.join(map(str, config['batch_sizes']))}{' --quick' if config['quick'] else ''}"
                 f"{' --seq-len ' + str(config['seq_len']) if config.get('seq_len') else ''} "
                 f"--output-dir {folder}`",
             "", f"Machine: {env.get('cpu_model')} ({env.get('cores')} cores, {env.get('memory_gib', '?')} GiB), "
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
    train = [r for r in by("train") if not r.get("oom")]
    if by("train"):
        base = next((r for r in train if r["mode"] == "dynamic" and r["precision"] == "fp32"),
                    train[0] if train else None)
        rows = []
        for r in by("train"):
            if r.get("oom"):
                rows.append([r["mode"], r["precision"], r["batch_size"], "out of memory", "", "", "", "", ""])
                continue
            rows.append([r["mode"], r["precision"], r["batch_size"], _f(r["seconds_per_epoch"]) + " (extrap.)",
                         _f(r["samples_per_s"]), _f(r["tokens_per_s"], 0), _share(r),
                         f"{base['seconds_per_epoch'] / r['seconds_per_epoch']:.2f}x",
                         f"{r['timed_steps']} (IQR {r['step_ms']['iqr']:,.0f} ms)"])
        limit = next(iter(by("train_limit")), {})
        rows_trained = train[0]["train_rows"] if train else 0
        parts += ["", "## Training", "", f"{rows_trained} training rows; each row is the median of its timed "
                  "steps (column: how many, and their interquartile range) after warm-up, on the epoch's "
                  "batches of median padded width; seconds per epoch extrapolated from the median step. "
                  "Speed-up against dynamic fp32 at the smallest batch.", "",
                  _table(["mode", "precision", "batch", "s/epoch", "samples/s", "tokens/s", "of ceiling",
                          "speed-up", "timed steps"], rows), "",
                  f"Largest batch that fit: {limit.get('largest_batch_that_fit')}; out of memory at: "
                  f"{limit.get('oom_batches') or 'none'}."]
        if config["target"] == "cpu":
            parts.append("No AMP rows: Paddle's AMP does nothing on CPU (it trains fp32), so timing it would "
                         "report fp32 twice.")
    fixed = [r for r in by("infer") if r.get("mode") == "fixed_shape"]
    if fixed:
        rows = [[r["backend"], r["batch_size"], _f(r["latency_ms"]["p50"]), _f(r["latency_ms"]["p95"]),
                 _f(r["texts_per_s"], 1), f"{r['max_abs_logit_diff_vs_first']:.1e}",
                 f"{r['label_agreement_vs_first']:.2f}", _share(r)] for r in fixed]
        parts += ["", "## Inference, fixed shape", "", f"Every input {fixed[0]['seq_len']} tokens (random ids); "
                  "ms per batch, median of the timed runs; differences against the dynamic graph on the same "
                  "inputs.", "", _table(["backend", "batch", "p50 ms", "p95 ms", "texts/s", "max |logit diff|",
                                          "label agreement", "of ceiling"], rows)]
    real = [r for r in by("infer") if r.get("mode") != "fixed_shape"]
    if real:
        rows = [[r["backend"], r["batch_size"], _f(r["latency_ms"]["p50"]), _f(r["latency_ms"]["p95"]),
                 _f(r["latency_ms"]["p99"]), _f(r["texts_per_s"], 0), _f(r["model_texts_per_s"], 0),
                 _f(r["tokenizer_ms_per_text"], 3), _f(r["accuracy"], 4), _share(r)]
                for r in real]
        first = real[0]
        parts += ["", "## Inference", "", f"{first['texts']} real dev texts ({first['mean_tokens']:.0f} tokens on "
                  "average), length-sorted batches padded to their longest text; latency per model call; texts/s "
                  "end to end includes the tokenizer, which is also shown alone.",
                  first.get("accuracy_note") or "", "",
                  _table(["backend", "batch", "p50 ms", "p95 ms", "p99 ms", "texts/s", "model texts/s",
                          "tokenizer ms/text", "accuracy", "of ceiling"], rows)]
    for r in by("serve"):
        s, d = r["server"], r["in_process"]
        parts += ["", "## Serving", "", f"In process (Predictor, batch 32): {d['texts_per_s']:,.0f} texts/s. "
                  f"Through `senti serve` ({s['clients']} clients, {s['requests']} requests of "
                  f"{s['texts_per_request']} texts, {s['errors']} errors): {s['texts_per_s']:,.0f} texts/s "
                  f"({r['server_over_in_process']:.0%} of in process), latency p50 {s['latency_ms']['p50']:.1f} ms, "
                  f"p95 {s['latency_ms']['p95']:.1f} ms, p99 {s['latency_ms']['p99']:.1f} ms; mean model batch "
                  f"{s['mean_model_batch']:.1f} texts."]
    for r in by("ray"):
        parts += ["", "## Ray Data", ""]
        if r.get("skipped"):
            parts.append(f"Skipped: {r['skipped']}.")
            continue
        parts.append(f"{r['rows']:,} rows from one Parquet file, backend {r['backend']}: in process "
                     f"{r['in_process_texts_per_s']:,.0f} texts/s; `senti predict --engine ray` ({r['actors']} actors x "
                     f"{r['threads_per_actor']} threads) {r['ray_texts_per_s']:,.0f} texts/s after start-up "
                     f"({r['ray_over_in_process']:.0%} of in process), {r['rows_out']:,} rows out, {r['errors']} errors; "
                     f"Ray start-up {r['ray_startup_s']:.1f} s, whole run {r['ray_total_s']:.1f} s.")
    peers = by("peer")
    if peers:
        parts += ["", "## Peer: PyTorch + transformers, same shape", ""]
        if peers[0].get("skipped"):
            parts.append(f"Skipped: {peers[0]['skipped']}.")
        else:
            for p in peers:
                if p["task"] == "train":
                    ours = next((r for r in train if r["mode"] == "dynamic" and r["precision"] == "fp32"
                                 and r["batch_size"] == p["batch_size"]), None)
                    ratio = f"; senti dynamic graph / PyTorch = {ours['samples_per_s'] / p['samples_per_s']:.2f}" \
                        if ours else ""
                    parts.append(f"- training, batch {p['batch_size']}: {p['samples_per_s']:.1f} samples/s, "
                                 f"{_share(p)} of ceiling ({p['framework']}){ratio}")
                else:
                    parts.append(f"- inference, batch {p['batch_size']} of one training batch "
                                 f"({p.get('mean_tokens', 0):.0f} tokens on average, unlike the table above): "
                                 f"p50 {p['latency_ms']['p50']:.1f} ms, {p['texts_per_s']:.0f} texts/s, "
                                 f"{_share(p)} of ceiling")
    _plots(folder, records)
    parts += ["", "Plots: `throughput.png` (training samples/s against batch size), `latency.png` "
                  "(inference latency percentiles by backend).", ""]
    path = folder / "report.md"
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
        fig.savefig(folder / "throughput.png", dpi=100)
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
        fig.savefig(folder / "latency.png", dpi=100)
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
    for folder, data in runs:
        label = folder.name
        header += [f"{label} s/epoch", f"{label} speed-up"] + ([f"{label} $/epoch"] if label in prices else [])
    rows = []
    for key in keys:
        row, base = list(key), None
        for folder, data in runs:
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
