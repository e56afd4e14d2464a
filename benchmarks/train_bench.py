"""Training suite: seconds per epoch, samples/s and tokens/s per batch size, precision and graph mode.

Each configuration trains a fresh model on real, length-bucketed batches for a fixed number of
timed steps after warm-up; the epoch time is extrapolated from the median step (and marked so).
Out-of-memory is caught and recorded as the limit, not crashed on.
"""

from __future__ import annotations

import numpy as np

from benchmarks.flops import training_flops
from benchmarks.timing import summarize
from serving.batching import pad_batch
from toolkit.batching import length_bucketed_batches
from toolkit.loop import optimizer_step

OOM_MARKERS = ("out of memory", "ResourceExhausted", "Cannot allocate")


def _is_oom(err: Exception) -> bool:
    return isinstance(err, MemoryError) or any(m in str(err) for m in OOM_MARKERS)


def bench_training(make_model, encoded, labels: np.ndarray, shape: dict, batch_sizes, precisions, modes,
                   steps: int, warmup: int, device: str, say=print, stop=None,
                   budget_s: float | None = None) -> list[dict]:
    """One record per (mode, precision, batch size); `make_model()` returns a fresh classifier.

    Each configuration times `steps` steps, or fewer (at least 3) once its timed steps pass `budget_s`.
    """
    import paddle
    import paddle.nn.functional as F
    from paddle.static import InputSpec

    records = []
    lengths = [len(e) for e in encoded]
    for mode in modes:
        for precision in precisions:
            for batch in batch_sizes:
                if stop and stop():
                    return records
                record = {"suite": "train", "mode": mode, "precision": precision, "batch_size": batch,
                          "device": device, "train_rows": len(encoded)}
                model = net = None
                try:
                    model = make_model()
                    model.train()
                    net = model
                    if mode == "to_static":
                        spec = [InputSpec([None, None], "int64", "input_ids"),
                                InputSpec([None, None], "int64", "token_type_ids")]
                        net = paddle.jit.to_static(model, input_spec=spec, full_graph=True)
                    optimizer = paddle.optimizer.AdamW(learning_rate=1e-4, parameters=model.parameters(),
                                                       grad_clip=paddle.nn.ClipGradByGlobalNorm(1.0))
                    scaler = paddle.amp.GradScaler(init_loss_scaling=1024) if precision == "fp16" else None
                    amp_dtype = "bfloat16" if precision == "bf16" else "float16"
                    rng = np.random.default_rng(0)
                    batches = representative_batches(lengths, batch, rng)
                    times, tokens, flops = [], [], []
                    for i in range(warmup + steps):
                        index = batches[i % len(batches)]
                        ids, types = pad_batch(encoded, index)
                        start = _now(device)
                        with paddle.amp.auto_cast(enable=precision != "fp32", dtype=amp_dtype, level="O1"):
                            logits = net(paddle.to_tensor(ids), paddle.to_tensor(types))
                        loss = F.cross_entropy(logits.astype("float32"), paddle.to_tensor(labels[index]))
                        optimizer_step(loss, optimizer, scaler)
                        float(loss)  # waits for the step to finish on accelerators
                        if i >= warmup:
                            times.append(_now(device) - start)
                            tokens.append(sum(lengths[j] for j in index))
                            flops.append(sum(training_flops(lengths[j], **shape) for j in index))
                            if budget_s is not None and len(times) >= 3 and sum(times) > budget_s:
                                break
                    step_s = float(np.median(times))
                    record.update(
                        step_ms=summarize(times), samples_per_s=batch / step_s,
                        tokens_per_s=float(np.mean(tokens)) / step_s,
                        seconds_per_epoch=len(encoded) / batch * step_s, epoch_extrapolated=True,
                        timed_steps=len(times), achieved_flops_per_s=float(np.mean(flops)) / step_s, oom=False,
                    )
                    say(f"train {mode} {precision} batch {batch}: {record['samples_per_s']:.1f} samples/s, "
                        f"{record['seconds_per_epoch']:.1f} s/epoch (extrapolated)")
                except Exception as err:  # only out-of-memory is an expected outcome
                    if not _is_oom(err):
                        raise
                    record.update(oom=True, error=str(err).splitlines()[0][:200])
                    say(f"train {mode} {precision} batch {batch}: out of memory")
                records.append(record)
                del model, net
                if device == "gpu":
                    paddle.device.cuda.empty_cache()
    return records


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
