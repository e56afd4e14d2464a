"""Inference suite: every backend at several batch sizes, on fixed shapes and on real texts.

Fixed shapes (random ids, every text `seq_len` tokens) measure the model alone and compare
backends exactly; real texts add the tokenizer (timed separately) and length-sorted dynamic
padding, and give each backend's accuracy beside its speed.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from senti.benchmarks.timing import summarize, time_calls
from senti.core import layout
from senti.core.batching import logits_in_order
from senti.serving.backends import FORMATS, OnnxBackend, PaddleBackend

# The dynamic graph, Paddle Inference's variants, then every exported ONNX format the device has kernels for.
CPU_BACKENDS = ("dynamic", "paddle-onednn", "paddle-plain",
                *(n for n, f in FORMATS.items() if n != "paddle" and f.precision != "fp16"))
GPU_BACKENDS = ("dynamic", "paddle-gpu", *(n for n, f in FORMATS.items() if n != "paddle" and f.precision != "int8"))


def dynamic_backend(checkpoint: Path):
    """The dynamic-graph model as a backend: what training produced, before any conversion."""
    import paddle

    from senti.core.checkpoint import load_checkpoint

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
        for name, fn in backends.items():
            latencies, passes = [], []
            logits = np.zeros((len(texts), 0), dtype=np.float32)

            def timed_call(ids, types, fn=fn):
                t0 = time.perf_counter()
                result = fn(ids, types)
                latencies.append(time.perf_counter() - t0)
                return result

            def one_pass():
                nonlocal logits
                t_pass = time.perf_counter()
                logits = logits_in_order(timed_call, encoded, batch, tokenizer.pad_id)
                passes.append(time.perf_counter() - t_pass)

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


def run(ctx) -> list[dict]:
    """The suite: every backend of the export (and the dynamic graph) on real dev texts, or fixed shapes."""
    from senti.benchmarks.flops import forward_flops
    from senti.serving import export_folder
    from senti.serving.tokenizer import FastTokenizer

    config = ctx.config
    export_meta, _ = export_folder.read_meta(ctx.export_dir)
    backends = open_backends(ctx.export_dir, ctx.checkpoint, GPU_BACKENDS if ctx.device == "gpu" else CPU_BACKENDS,
                             ctx.threads, ctx.device)
    if config.seq_len:  # model alone: every text exactly seq_len tokens, compared against the dynamic graph
        records = bench_fixed_shape(backends, sorted({1, *config.batch_sizes[:1]}), config.seq_len,
                                    export_meta.model.vocab_size, repeats=config.repeats, budget_s=60)
        for r in records:
            r["flops_per_text"] = forward_flops(config.seq_len, **ctx.shape)
            r["model_texts_per_s"] = r["texts_per_s"]
            r["achieved_flops_per_s"] = float(r["texts_per_s"] * r["flops_per_text"])
            ctx.say(f"infer {r['backend']} batch {r['batch_size']} x {config.seq_len} tokens: p50 "
                    f"{r['latency_ms']['p50']:.1f} ms, max |diff| vs dynamic {r['max_abs_logit_diff_vs_first']:.1e}")
        return records
    rows = ctx.splits.dev[: 64 if config.quick else config.infer_texts]
    texts = [e.text for e in rows]
    gold = np.array([ctx.labels.index(e.label) for e in rows]) if ctx.trained else None
    tokenizer = FastTokenizer.from_settings(ctx.export_dir, export_meta.tokenizer)
    batch_sizes = sorted({1, *config.batch_sizes[:1 if config.quick else 2]})
    max_seq_len = ctx.meta.max_seq_len
    records = bench_real_texts(backends, tokenizer, texts, gold, max_seq_len, batch_sizes,
                               repeats=2 if config.quick else config.repeats, budget_s=5 if config.quick else 12)
    lengths = [len(e) for e in tokenizer(texts, max_seq_len)]
    flops_per_text = float(np.mean([forward_flops(n, **ctx.shape) for n in lengths]))
    for r in records:
        r["flops_per_text"] = flops_per_text
        r["achieved_flops_per_s"] = float(r["model_texts_per_s"] * flops_per_text)
        r["accuracy_note"] = None if ctx.trained else "random weights: accuracy is chance level"
        ctx.say(f"infer {r['backend']} batch {r['batch_size']}: p50 {r['latency_ms']['p50']:.1f} ms, "
                f"{r['texts_per_s']:.0f} texts/s")
    return records


def report(results) -> list[str]:
    """The report's inference sections: fixed shapes and real texts."""
    from senti.benchmarks.markdown import number, share, table

    lines = []
    fixed = [r for r in results.by_suite("infer") if r.get("mode") == "fixed_shape"]
    if fixed:
        rows = [[r["backend"], r["batch_size"], number(r["latency_ms"]["p50"]), number(r["latency_ms"]["p95"]),
                 number(r["texts_per_s"], 1), f"{r['max_abs_logit_diff_vs_first']:.1e}",
                 f"{r['label_agreement_vs_first']:.2f}", share(r)] for r in fixed]
        lines += ["", "## Inference, fixed shape", "", f"Every input {fixed[0]['seq_len']} tokens (random ids); "
                  "ms per batch, median of the timed runs; differences against the dynamic graph on the same "
                  "inputs.", "", table(["backend", "batch", "p50 ms", "p95 ms", "texts/s", "max |logit diff|",
                                         "label agreement", "of ceiling"], rows)]
    real = [r for r in results.by_suite("infer") if r.get("mode") != "fixed_shape"]
    if real:
        rows = [[r["backend"], r["batch_size"], number(r["latency_ms"]["p50"]), number(r["latency_ms"]["p95"]),
                 number(r["latency_ms"]["p99"]), number(r["texts_per_s"], 0), number(r["model_texts_per_s"], 0),
                 number(r["tokenizer_ms_per_text"], 3), number(r["accuracy"], 4), share(r)]
                for r in real]
        first = real[0]
        lines += ["", "## Inference", "", f"{first['texts']} real dev texts ({first['mean_tokens']:.0f} tokens on "
                  "average), length-sorted batches padded to their longest text; latency per model call; texts/s "
                  "end to end includes the tokenizer, which is also shown alone.",
                  first.get("accuracy_note") or "", "",
                  table(["backend", "batch", "p50 ms", "p95 ms", "p99 ms", "texts/s", "model texts/s",
                         "tokenizer ms/text", "accuracy", "of ceiling"], rows)]
    return lines
