"""Training suite: seconds per epoch, samples/s and tokens/s per batch size, precision and graph mode.

Each configuration trains a fresh model on real, length-bucketed batches for a fixed number of
timed steps after warm-up; the epoch time is extrapolated from the median step (and marked so).
Out-of-memory is caught and recorded as the limit, not crashed on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from senti.benchmarks.flops import mlm_training_flops, training_flops
from senti.benchmarks.timing import summarize
from senti.core.batching import pad_batch
from senti.toolkit.data.batching import length_bucketed_batches
from senti.toolkit.training.loop import optimizer_step

OOM_MARKERS = ("out of memory", "ResourceExhausted", "Cannot allocate")


def _is_oom(err: Exception) -> bool:
    return isinstance(err, MemoryError) or any(m in str(err) for m in OOM_MARKERS)


@dataclass
class TrainingData:
    """The encoded training texts, their label ids, and the model's shape (layers, hidden, ffn) for FLOP counts."""

    encoded: list
    labels: np.ndarray
    shape: dict


@dataclass
class StepPlan:
    """What to time: every batch size in every precision, `steps` steps after `warmup`; with `budget_s`, fewer (at
    least 3) once the timed steps pass it."""

    batch_sizes: list[int]
    precisions: list[str]
    steps: int
    warmup: int
    device: str = "cpu"
    budget_s: float | None = None


def bench_training(make_model, data: TrainingData, plan: StepPlan, modes, say=print, stop=None) -> list[dict]:
    """One record per (mode, precision, batch size); `make_model()` returns a fresh classifier.

    Modes: `dynamic`, senti train's default path (on a CPU with `cpu_kernels`: senti's C kernels, or its Python
    kernels where no C compiler is found); `dynamic-paddle`, the same with Paddle's own kernels (the path they
    replaced, kept for the comparison); `to_static`.
    """
    records: list[dict] = []
    for mode in modes:
        for precision in plan.precisions:
            for batch in plan.batch_sizes:
                if stop and stop():
                    return records
                if plan.device == "cpu" and precision == "bf16" and mode != "dynamic":
                    continue  # a CPU's bf16 lives in senti's Linears (bf16.py): Paddle's own kernels run fp32
                records.append(_configuration(make_model, data, plan, (mode, precision, batch), say))
    return records


def _configuration(make_model, data: TrainingData, plan: StepPlan, which: tuple[str, str, int], say) -> dict:
    """The record of one (mode, precision, batch size): its steps timed, or out of memory."""
    import paddle

    mode, precision, batch = which
    record = {"suite": "train", "mode": mode, "precision": precision, "batch_size": batch, "device": plan.device,
              "train_rows": len(data.encoded)}
    model = net = None
    try:
        model = make_model()
        net, optimizer = _trainable(model, mode, precision, plan.device)
        times, tokens, flops = _timed_steps(net, optimizer, data, plan, precision, batch)
        step_s = float(np.median(times))
        record.update(
            step_ms=summarize(times), samples_per_s=batch / step_s, tokens_per_s=float(np.mean(tokens)) / step_s,
            seconds_per_epoch=len(data.encoded) / batch * step_s, epoch_extrapolated=True, timed_steps=len(times),
            achieved_flops_per_s=float(np.mean(flops)) / step_s, oom=False,
        )
        say(f"train {mode} {precision} batch {batch}: {record['samples_per_s']:.1f} samples/s, "
            f"{record['seconds_per_epoch']:.1f} s/epoch (extrapolated)")
    except Exception as err:  # only out-of-memory is an expected outcome
        if not _is_oom(err):
            raise
        record.update(oom=True, error=str(err).splitlines()[0][:200])
        say(f"train {mode} {precision} batch {batch}: out of memory")
    del model, net
    if plan.device == "gpu":
        paddle.device.cuda.empty_cache()
    return record


def _timed_steps(net, optimizer, data: TrainingData, plan: StepPlan, precision: str, batch: int):
    """(seconds, tokens, FLOPs) of each timed step on batches of median width."""
    import paddle
    import paddle.nn.functional as F

    scaler = paddle.amp.GradScaler(init_loss_scaling=1024) if precision == "fp16" else None
    amp_dtype: Literal["bfloat16", "float16"] = "bfloat16" if precision == "bf16" else "float16"
    lengths = [len(e) for e in data.encoded]
    batches = representative_batches(lengths, batch, np.random.default_rng(0))
    times: list[float] = []
    tokens, flops = [], []
    for i in range(plan.warmup + plan.steps):
        index = batches[i % len(batches)]
        ids, types = pad_batch(data.encoded, index)
        start = _now(plan.device)
        with paddle.amp.auto_cast(enable=precision != "fp32" and plan.device != "cpu", dtype=amp_dtype, level="O1"):
            logits = net(paddle.to_tensor(ids), paddle.to_tensor(types))
        loss = F.cross_entropy(logits.astype("float32"), paddle.to_tensor(data.labels[index]))
        optimizer_step(loss, optimizer, scaler)
        float(loss)  # waits for the step to finish on accelerators
        if i >= plan.warmup:
            times.append(_now(plan.device) - start)
            tokens.append(sum(lengths[j] for j in index))
            flops.append(sum(training_flops(lengths[j], **data.shape) for j in index))
            if plan.budget_s is not None and len(times) >= 3 and sum(times) > plan.budget_s:
                break
    return times, tokens, flops


def _trainable(model, mode: str, precision: str, device: str):
    """(the network to call, its AdamW) for a bench mode: `dynamic` with senti's CPU kernels on a CPU (bf16 Linears
    for precision bf16), `dynamic-paddle` as is, `to_static` compiled."""
    import paddle
    from paddle.static import InputSpec

    model.train()
    net = model
    if mode == "dynamic" and device == "cpu":  # senti train's default path on a CPU
        from senti.kernels.cpu_kernels import use_cpu_kernels

        use_cpu_kernels(model, 0, bf16=precision == "bf16")
    if mode == "to_static":
        spec = [InputSpec([None, None], "int64", "input_ids"), InputSpec([None, None], "int64", "token_type_ids")]
        net = paddle.jit.to_static(model, input_spec=spec, full_graph=True)
    optimizer = paddle.optimizer.AdamW(learning_rate=1e-4, parameters=model.parameters(),
                                       grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
    return net, optimizer


def representative_batches(lengths, batch_size: int, rng) -> list:
    """The epoch's length-bucketed batches, those padded closest to the median batch first.

    Only a few steps are timed, and bucketed batches range from a few tokens to max_seq_len wide:
    timing the first ones drawn would make batch sizes incomparable and the epoch estimate depend
    on luck. The median-width batches make seconds per epoch (median step x batches) representative.
    """
    batches = length_bucketed_batches(lengths, batch_size, rng)
    widths = np.array([max(lengths[j] for j in index) for index in batches])
    order = np.argsort(np.abs(widths - np.median(widths)), kind="stable")
    return [batches[k] for k in order]


def _now(device: str) -> float:
    import time

    if device == "gpu":
        import paddle

        paddle.device.synchronize()
    return time.perf_counter()


def run(ctx) -> list[dict]:
    """The suite: every (mode, precision, batch size) on random weights of the model's shape."""
    from senti.benchmarks.run import precisions_for

    def fresh():  # random weights of the checkpoint's shape: speed does not depend on them
        from paddlenlp.transformers import ErnieForSequenceClassification

        return ErnieForSequenceClassification(ctx.model_config)

    plan = StepPlan(ctx.batch_sizes, precisions_for(ctx.config), ctx.steps, ctx.warmup, ctx.device,
                    None if ctx.config.quick else ctx.config.train_budget_s)
    records = bench_training(fresh, TrainingData(ctx.encoded, ctx.y, ctx.shape), plan,
                             ["dynamic", "dynamic-paddle", "to_static"], say=ctx.say, stop=ctx.stop)
    fitting = [r["batch_size"] for r in records if not r.get("oom")]
    records.append({"suite": "train_limit", "largest_batch_that_fit": max(fitting or [0]),
                    "oom_batches": sorted({r["batch_size"] for r in records if r.get("oom")})})
    if not (ctx.stop and ctx.stop()):
        records += bench_pretraining(ctx.model_config, ctx.encoded, ctx.shape, ctx.batch_sizes[0], ctx.steps,
                                     ctx.warmup, ctx.device, say=ctx.say)
    return records


def bench_pretraining(model_config, encoded, shape: dict, batch: int, steps: int, warmup: int, device: str,
                      say=print) -> list[dict]:
    """`senti pretrain`'s step (ERNIE masked-LM, whole-word masking off, 15% of tokens) with the output head
    over the masked positions only, and over every position as PaddleNLP's default does."""
    import paddle
    import paddle.nn.functional as F
    from paddlenlp.transformers import ErnieForMaskedLM

    from senti.toolkit.training.masking import Masking, mask_batch

    lengths = [len(e) for e in encoded]
    batches = representative_batches(lengths, batch, np.random.default_rng(0))
    vocab = model_config.vocab_size
    records = []
    for head in ("masked positions", "every position"):
        model = ErnieForMaskedLM(model_config)
        if device == "cpu":  # as senti pretrain trains on a CPU
            from senti.kernels.cpu_kernels import use_cpu_kernels

            use_cpu_kernels(model, 0)
        optimizer = paddle.optimizer.AdamW(learning_rate=1e-4, parameters=model.parameters())
        rng = np.random.default_rng(1)
        times, tokens, flops = [], [], []
        for i in range(warmup + steps):
            index = batches[i % len(batches)]
            seqs = [np.asarray(encoded[j][1:-1]) for j in index]
            ids, positions, labels = mask_batch(seqs, [np.ones(len(s), dtype=np.uint8) for s in seqs], rng,
                                                Masking(vocab_size=vocab, mask_id=4, first_normal_id=5, rate=0.15,
                                                        whole_word=False, cls_id=encoded[index[0]][0],
                                                        sep_id=encoded[index[0]][-1]))
            start = _now(device)
            if head == "masked positions":
                scores = model(paddle.to_tensor(ids), masked_positions=paddle.to_tensor(positions))
            else:
                scores = model(paddle.to_tensor(ids)).reshape([-1, vocab]).gather(paddle.to_tensor(positions))
            loss = F.cross_entropy(scores, paddle.to_tensor(labels))
            optimizer_step(loss, optimizer)
            float(loss)
            if i >= warmup:
                times.append(_now(device) - start)
                tokens.append(ids.size)
                scored = len(positions) if head == "masked positions" else ids.size
                flops.append(sum(mlm_training_flops(lengths[j], 0, **shape, vocab=vocab) for j in index)
                             + mlm_training_flops(0, scored, **shape, vocab=vocab))
        step_s = float(np.median(times))
        records.append({"suite": "pretrain", "head": head, "batch_size": batch, "precision": "fp32",
                        "device": device, "step_ms": summarize(times), "samples_per_s": batch / step_s,
                        "tokens_per_s": float(np.mean(tokens)) / step_s, "timed_steps": len(times),
                        "achieved_flops_per_s": float(np.mean(flops)) / step_s})
        say(f"pretrain step, head at {head}, batch {batch}: {records[-1]['tokens_per_s']:,.0f} tokens/s")
    return records


def report(results) -> list[str]:
    """The report's training section."""
    from senti.benchmarks.markdown import number, share, table

    measured = results.by_suite("train")
    train = [r for r in measured if not r.get("oom")]
    base = next((r for r in train if r["mode"] == "dynamic" and r["precision"] == "fp32"), train[0] if train else None)
    rows = []
    for r in measured:
        if r.get("oom"):
            rows.append([r["mode"], r["precision"], r["batch_size"], "out of memory", "", "", "", "", ""])
            continue
        assert base is not None  # r itself is a measured row
        rows.append([r["mode"], r["precision"], r["batch_size"], number(r["seconds_per_epoch"]) + " (extrap.)",
                     number(r["samples_per_s"]), number(r["tokens_per_s"], 0), share(r),
                     f"{base['seconds_per_epoch'] / r['seconds_per_epoch']:.2f}x",
                     f"{r['timed_steps']} (IQR {r['step_ms']['iqr']:,.0f} ms)"])
    limit: dict = next(iter(results.by_suite("train_limit")), {})
    rows_trained = train[0]["train_rows"] if train else 0
    lines = ["", "## Training", "", f"{rows_trained} training rows; each row is the median of its timed "
             "steps (column: how many, and their interquartile range) after warm-up, on the epoch's "
             "batches of median padded width; seconds per epoch extrapolated from the median step. "
             "Speed-up against dynamic fp32 at the smallest batch.", "",
             table(["mode", "precision", "batch", "s/epoch", "samples/s", "tokens/s", "of ceiling",
                    "speed-up", "timed steps"], rows), "",
             f"Largest batch that fit: {limit.get('largest_batch_that_fit')}; out of memory at: "
             f"{limit.get('oom_batches') or 'none'}."]
    if results.config["target"] == "cpu":
        lines.append("bf16 rows are senti's `--amp` on a CPU (bfloat16 Linears through oneDNN), in the dynamic mode "
                     "only: Paddle's own AMP does nothing on a CPU. None where the CPU has no AVX-512 BF16 or AMX "
                     "(`senti info` says why).")
    pretrain = results.by_suite("pretrain")
    if pretrain:
        lines += ["", "### Pretraining step (masked-LM, 15% of tokens, fp32, dynamic graph)", "",
                  "tokens/s counts padded batch tokens; FLOPs count the head only where it scores.", "",
                  table(["output head at", "batch", "tokens/s", "samples/s", "of ceiling", "timed steps"],
                        [[r["head"], r["batch_size"], number(r["tokens_per_s"], 0), number(r["samples_per_s"]),
                          share(r), r["timed_steps"]] for r in pretrain])]
    return lines
