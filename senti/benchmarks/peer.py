"""The peer a user would pick instead: PyTorch with Hugging Face transformers, same shape, same batches.

PaddleNLP 2.8 pins huggingface_hub below 0.26 and today's transformers needs a newer one, so
the peer runs in its own environment (`make peer-venv` makes `.venv-peer`; or point
SENTI_PEER_PYTHON at any Python with torch and transformers). senti writes the exact padded
batches to a file; `senti/benchmarks/peer_worker.py` times them there.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from senti.benchmarks.flops import forward_flops, mlm_training_flops, training_flops
from senti.benchmarks.train_bench import StepPlan, TrainingData, representative_batches
from senti.core.batching import pad_batch

ROOT = Path(__file__).resolve().parents[2]  # the repository, where make peer-venv puts .venv-peer
WORKER = Path(__file__).resolve().parent / "peer_worker.py"


def peer_python() -> str | None:
    candidate = os.environ.get("SENTI_PEER_PYTHON") or str(ROOT / ".venv-peer" / "bin" / "python")
    return candidate if Path(candidate).is_file() else None


def _peer_python() -> str:
    python = peer_python()
    if python is None:
        raise RuntimeError("no peer environment: make peer-venv, or set SENTI_PEER_PYTHON")
    return python


def available() -> str | None:
    """None when the peer environment imports torch and transformers, else why not."""
    python = peer_python()
    if python is None:
        return "no peer environment (make peer-venv, or set SENTI_PEER_PYTHON)"
    check = subprocess.run([python, "-c", "import torch, transformers"], capture_output=True, text=True)
    return None if check.returncode == 0 else f"{python} cannot import torch and transformers"


def bench_peer(data: TrainingData, heads: int, vocab_size: int, num_labels: int, plan: StepPlan,
               threads: int) -> list[dict]:
    """Training samples/s (in each of the plan's precisions: fp32, bf16 under PyTorch's autocast) and inference
    latency of a BertForSequenceClassification of the same shape."""
    records = []
    encoded, labels, shape = data.encoded, data.labels, data.shape
    steps, warmup, device = plan.steps, plan.warmup, plan.device
    lengths = [len(e) for e in encoded]
    for batch in plan.batch_sizes:
        batches = representative_batches(lengths, batch, np.random.default_rng(0))[: warmup + steps]
        arrays: dict[str, Any] = {}
        for i, index in enumerate(batches):
            arrays[f"ids_{i}"], _ = pad_batch(encoded, index)
            arrays[f"y_{i}"] = labels[index]
        with tempfile.TemporaryDirectory() as tmp:
            np.savez(Path(tmp) / "batches.npz", **arrays)
            spec = {"vocab_size": vocab_size, "layers": shape["layers"], "hidden": shape["hidden"], "heads": heads,
                    "ffn": shape["ffn"], "labels": num_labels, "steps": steps, "warmup": warmup,
                    "threads": threads, "device": device, "batches": len(batches), "train_rows": len(encoded),
                    "ceiling_size": 8192 if device == "gpu" else 2048,
                    "precisions": [p for p in plan.precisions if p in ("fp32", "bf16")]}
            (Path(tmp) / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
            result = subprocess.run([_peer_python(), str(WORKER), tmp], capture_output=True, text=True, timeout=1800)
            if result.returncode != 0:
                raise RuntimeError(f"peer worker failed: {result.stderr[-1500:]}")
            results = json.loads((Path(tmp) / "result.json").read_text(encoding="utf-8"))
        # FLOPs from the real token counts of the very batches the worker timed, as for senti's own records
        step_flops = np.mean([sum(training_flops(lengths[j], **shape) for j in index)
                              for index in batches[warmup:]])
        infer_flops = sum(forward_flops(lengths[j], **shape) for j in batches[0])
        mean_tokens = {"train": float(np.mean([lengths[j] for index in batches[warmup:] for j in index])),
                       "infer": float(np.mean([lengths[j] for j in batches[0]]))}
        for record in results:
            if record["task"] == "ceiling":
                records.append({"suite": "ceiling", "runtime": "torch", "precision": record.get("precision", "fp32"),
                                "framework": record["framework"], "size": record["size"], "when": "peer",
                                "matmul_flops_per_s": record["matmul_flops_per_s"]})
                continue
            if record["task"] == "pretrain":  # transformers scores every position: the head's FLOPs at each
                flops = np.mean([sum(mlm_training_flops(lengths[j], lengths[j], **shape, vocab=vocab_size)
                                     for j in index) for index in batches[warmup:]])
                records.append({"suite": "peer", "batch_size": batch, "precision": "fp32",
                                "achieved_flops_per_s": float(flops / (record["step_ms"]["p50"] / 1000)), **record})
                continue
            seconds = (record["step_ms"] if record["task"] == "train" else record["latency_ms"])["p50"] / 1000
            achieved = (step_flops if record["task"] == "train" else infer_flops) / seconds
            records.append({"suite": "peer", "batch_size": batch, "precision": "fp32",
                            "mean_tokens": mean_tokens[record["task"]], "achieved_flops_per_s": float(achieved),
                            **record})
    return records


def run(ctx) -> list[dict]:
    """The suite: PyTorch + transformers on the same shape and batches, in the peer environment."""
    reason = available()
    if reason:
        ctx.say(f"peer: skipped ({reason})")
        return [{"suite": "peer", "skipped": reason}]
    from senti.benchmarks.run import precisions_for

    cfg = ctx.model_config
    plan = StepPlan(ctx.batch_sizes[:1], precisions_for(ctx.config), ctx.steps, ctx.warmup, ctx.device)
    return bench_peer(TrainingData(ctx.encoded, ctx.y, ctx.shape), cfg.num_attention_heads, cfg.vocab_size,
                      len(ctx.labels), plan, ctx.threads)


def report(results) -> list[str]:
    from senti.benchmarks.markdown import share

    peers = results.by_suite("peer")
    train = [r for r in results.by_suite("train") if not r.get("oom")]
    lines = ["", "## Peer: PyTorch + transformers, same shape", ""]
    if peers[0].get("skipped"):
        return lines + [f"Skipped: {peers[0]['skipped']}."]
    for p in peers:
        if p["task"] == "train":
            precision = p.get("precision", "fp32")
            ours = next((r for r in train if r["mode"] == "dynamic" and r["precision"] == precision
                         and r["batch_size"] == p["batch_size"]), None)
            ratio = (f"; senti dynamic graph / PyTorch = {ours['samples_per_s'] / p['samples_per_s']:.2f}"
                     if ours else "")
            lines.append(f"- training {precision}, batch {p['batch_size']}: {p['samples_per_s']:.1f} samples/s, "
                         f"{share(p)} of ceiling ({p['framework']}){ratio}")
        elif p["task"] == "pretrain":
            ours = next((r for r in results.by_suite("pretrain") if r["head"] == "masked positions"), None)
            ratio = (f"; senti's step (head at masked positions) / PyTorch = "
                     f"{ours['tokens_per_s'] / p['tokens_per_s']:.2f}" if ours else "")
            lines.append(f"- masked-LM pretraining step, batch {p['batch_size']} (head at every position, as "
                         f"transformers does): {p['tokens_per_s']:,.0f} tokens/s, {share(p)} of ceiling{ratio}")
        else:
            lines.append(f"- inference, batch {p['batch_size']} of one training batch "
                         f"({p.get('mean_tokens', 0):.0f} tokens on average, unlike the table above): "
                         f"p50 {p['latency_ms']['p50']:.1f} ms, {p['texts_per_s']:.0f} texts/s, "
                         f"{share(p)} of ceiling")
    return lines
