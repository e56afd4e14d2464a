"""Inference suite: every backend at several batch sizes, on fixed shapes and on real texts.

Fixed shapes (random ids, every text `seq_len` tokens) measure the model alone and compare
backends exactly; real texts add the tokenizer (timed separately) and length-sorted dynamic
padding, and give each backend's accuracy beside its speed.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from benchmarks.timing import summarize, time_calls
from serving.backends import OnnxBackend, PaddleBackend
from serving.batching import length_sorted_batches, pad_batch
from serving import layout

CPU_BACKENDS = ("dynamic", "paddle-onednn", "paddle-plain", "onnx", "onnx-opt", "onnx-int8")
GPU_BACKENDS = ("dynamic", "paddle-gpu", "onnx", "onnx-opt", "onnx-fp16")


def dynamic_backend(checkpoint: Path):
    """The dynamic-graph model as a backend: what training produced, before any conversion."""
    import paddle

    from export.checkpoint import load_checkpoint

    model, _, _ = load_checkpoint(checkpoint)

    def run(input_ids, token_type_ids):
        with paddle.no_grad():
            return model(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids)).numpy()

    return run


def open_backends(export_dir: Path, checkpoint: Path | None, names, threads: int, device: str = "cpu") -> dict:
    """name -> callable(input_ids, token_type_ids); formats missing from the export are skipped."""
    found = {}
    for name in names:
        if name == "dynamic":
            if checkpoint is not None:
                found[name] = dynamic_backend(checkpoint)
        elif name.startswith("paddle"):
            if (export_dir / layout.PADDLE_DIR).is_dir():
                found[name] = PaddleBackend(export_dir / layout.PADDLE_DIR, threads, device=device,
                                            onednn=name == "paddle-onednn")
        elif (export_dir / layout.ONNX_FILES[name]).is_file():
            found[name] = OnnxBackend(export_dir / layout.ONNX_FILES[name], threads, device=device)
    return found


def bench_fixed_shape(backends: dict, batch_sizes, seq_len: int, vocab_size: int, repeats: int,
                      budget_s: float = 20.0, seed: int = 0) -> list[dict]:
    """ms per batch of `seq_len`-token inputs, and each backend's max |logit diff| from the first one."""
    rng = np.random.default_rng(seed)
    records = []
    for batch in batch_sizes:
        ids = rng.integers(5, vocab_size, size=(batch, seq_len), dtype=np.int64)
        ids[:, 0], ids[:, -1] = 2, 3
        types = np.zeros_like(ids)
        reference = None
        for name, fn in backends.items():
            logits = np.asarray(fn(ids, types), dtype=np.float32)
            reference = logits if reference is None else reference
            seconds = time_calls(lambda: fn(ids, types), repeats, warmup=1, budget_s=budget_s)
            records.append({
                "suite": "infer", "mode": "fixed_shape", "backend": name, "batch_size": batch, "seq_len": seq_len,
                "latency_ms": summarize(seconds), "texts_per_s": batch / float(np.median(seconds)),
                "tokens_per_s": batch * seq_len / float(np.median(seconds)),
                "max_abs_logit_diff_vs_first": float(np.abs(logits - reference).max()),
                "label_agreement_vs_first": float((logits.argmax(1) == reference.argmax(1)).mean()),
            })
    return records


def bench_real_texts(backends: dict, tokenizer, texts: list[str], gold: np.ndarray | None, max_seq_len: int,
                     batch_sizes, repeats: int, budget_s: float = 20.0) -> list[dict]:
    """Per backend and batch size: latency per length-sorted batch, texts/s end to end, accuracy."""
    started = time.perf_counter()
    encoded = tokenizer(texts, max_seq_len)
    tokenize_s = time.perf_counter() - started
    tokens = [len(e) for e in encoded]
    records = []
    for batch in batch_sizes:
        batches = [pad_batch(encoded, index, tokenizer.pad_id) + (index,)
                   for index in length_sorted_batches(tokens, batch)]
        for name, fn in backends.items():
            latencies, passes = [], []
            logits = np.zeros((len(texts), 0), dtype=np.float32)

            def one_pass():
                nonlocal logits
                out = None
                t_pass = time.perf_counter()
                for ids, types, index in batches:
                    t0 = time.perf_counter()
                    result = np.asarray(fn(ids, types), dtype=np.float32)
                    latencies.append(time.perf_counter() - t0)
                    if out is None:
                        out = np.zeros((len(texts), result.shape[1]), dtype=np.float32)
                    out[index] = result
                passes.append(time.perf_counter() - t_pass)
                logits = out

            one_pass()  # warm-up: also the logits for accuracy
            latencies.clear()
            passes.clear()
            t0 = time.perf_counter()
            for _ in range(repeats):
                one_pass()
                if time.perf_counter() - t0 > budget_s:
                    break
            model_s = float(np.median(passes))
            records.append({
                "suite": "infer", "mode": "real_texts", "backend": name, "batch_size": batch,
                "texts": len(texts), "mean_tokens": float(np.mean(tokens)), "max_seq_len": max_seq_len,
                "latency_ms": summarize(latencies),
                "model_texts_per_s": len(texts) / model_s,
                "texts_per_s": len(texts) / (model_s + tokenize_s),
                "tokenizer_ms_per_text": 1000 * tokenize_s / len(texts),
                "accuracy": float((logits.argmax(1) == gold).mean()) if gold is not None else None,
                "passes": len(passes),
            })
    return records
