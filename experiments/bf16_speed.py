"""Training speed in float32 and bfloat16, senti (`--amp` on a CPU) beside PyTorch's CPU autocast, one run.

    python -m experiments.bf16_speed --dataset chnsenticorp/ [--shapes 4l-312h,6l-768h,4l-512h,12l-384h,12l-768h]
        [--batch-sizes 32,64] [--steps 6] [--work runs/bf16_speed]

Per shape (random weights; speed does not depend on them) and batch size, on the same length-bucketed batches of
the dataset's training texts: senti's dynamic-graph step (its CPU kernels) in fp32 and with bf16 Linears, then the
peer (PyTorch + transformers BertForSequenceClassification, `make peer-venv`) in fp32 and under
`torch.autocast("cpu", dtype=torch.bfloat16)`. The matmul ceilings (Paddle's MKL fp32, oneDNN's bf16 GEMM,
PyTorch's fp32 and bf16) are measured at the start and the end. Writes results.json and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--shapes", default="4l-312h,6l-768h,4l-512h,12l-384h")
    parser.add_argument("--batch-sizes", default="32,64")
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--work", default="runs/bf16_speed")
    args = parser.parse_args(argv)

    from senti.core.runtime import configure_runtime

    runtime = configure_runtime(args.threads)
    from senti.benchmarks import peer
    from senti.benchmarks.ceiling import measure_ceilings
    from senti.benchmarks.models import random_checkpoint
    from senti.benchmarks.timing import environment
    from senti.benchmarks.train_bench import StepPlan, TrainingData, bench_training
    from senti.core.checkpoint import load_checkpoint
    from senti.kernels import bf16
    from senti.toolkit.data.batching import encode_texts
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.logs import quiet_libraries

    quiet_libraries()
    if (why := bf16.why_not()) is not None:
        raise SystemExit(f"no bfloat16 training here: {why}")
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    threads = int(runtime.omp_num_threads or 1)
    splits = load_splits(args.dataset, seed=42)
    texts = [e.text for e in splits.train]
    labels = np.array([splits.labels.index(e.label) for e in splits.train], dtype=np.int64)
    sizes = [int(b) for b in args.batch_sizes.split(",")]
    records = measure_ceilings("cpu", threads, ["fp32", "bf16"], "start")
    for shape in args.shapes.split(","):
        checkpoint = random_checkpoint(shape, work / f"{shape}-checkpoint", texts, splits.labels)
        model, tokenizer, meta = load_checkpoint(checkpoint)
        cfg = model.config
        dims = {"layers": cfg.num_hidden_layers, "hidden": cfg.hidden_size, "ffn": cfg.intermediate_size}
        encoded, _ = encode_texts(tokenizer, texts, meta.max_seq_len)

        def fresh(cfg=cfg):
            from paddlenlp.transformers import ErnieForSequenceClassification

            return ErnieForSequenceClassification(cfg)

        data, plan = TrainingData(encoded, labels, dims), StepPlan(sizes, ["fp32", "bf16"], args.steps, 1, "cpu")
        for r in bench_training(fresh, data, plan, ["dynamic"]):
            records.append({**r, "shape": shape, "runtime": "senti"})
        for r in peer.bench_peer(data, cfg.num_attention_heads, cfg.vocab_size, len(splits.labels), plan, threads):
            records.append({**r, "shape": shape, "runtime": "torch"})
        (work / "results.json").write_text(json.dumps({"environment": environment(), "records": records}, indent=1))
    records += measure_ceilings("cpu", threads, ["fp32", "bf16"], "end")
    (work / "results.json").write_text(json.dumps({"environment": environment(), "records": records}, indent=1))
    print("\n".join(table(records)))
    return records


def table(records: list[dict]) -> list[str]:
    """One row per shape and batch size: samples/s of senti and PyTorch in fp32 and bf16, and the ratios."""
    def rate(shape, batch, runtime, precision):
        for r in records:
            if (r.get("shape"), r.get("batch_size"), r.get("runtime"), r.get("precision")) == (
                    shape, batch, runtime, precision) and (r.get("suite") == "train" or r.get("task") == "train"):
                return r["samples_per_s"]
        return float("nan")

    lines = ["| shape | batch | senti fp32 | senti bf16 | bf16 / fp32 | PyTorch fp32 | PyTorch bf16 | senti bf16 / "
             "PyTorch bf16 |", "|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["shape"], r["batch_size"]) for r in records if r.get("shape") and "batch_size" in r})
    for shape, batch in keys:
        s32, s16 = rate(shape, batch, "senti", "fp32"), rate(shape, batch, "senti", "bf16")
        t32, t16 = rate(shape, batch, "torch", "fp32"), rate(shape, batch, "torch", "bf16")
        lines.append(f"| {shape} | {batch} | {s32:.1f} | {s16:.1f} | {s16 / s32:.2f}x | {t32:.1f} | {t16:.1f} | "
                     f"{s16 / t16:.2f}x |")
    for r in records:
        if r.get("suite") == "ceiling":
            lines.append(f"- ceiling ({r['when']}): {r['runtime']} {r['precision']} {r['size']}x{r['size']} "
                         f"{r['matmul_flops_per_s'] / 1e9:,.0f} GFLOP/s")
    return lines


if __name__ == "__main__":
    main()
