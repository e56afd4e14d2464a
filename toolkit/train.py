"""`senti train`: fine-tune an ERNIE classifier in Paddle's dynamic graph, one device or data-parallel."""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path

import numpy as np

from serving import layout
from serving.runtime import configure_runtime
from serving.batching import pad_batch
from toolkit.batching import encode_texts, length_bucketed_batches
from toolkit.checkpoint import save_checkpoint, versions, write_json_atomic
from toolkit.config import TrainConfig
from toolkit.data import load_splits
from toolkit.errors import SentiError
from toolkit.evaluate import classification_metrics, predict_logits
from toolkit.models import build_model


class TrainingDiverged(SentiError):
    """The loss became NaN or infinite."""


class TrainingInterrupted(SentiError):
    """SIGINT or SIGTERM arrived; the best checkpoint so far is intact."""


def select_device(name: str) -> str:
    """Resolve `auto` and check that the requested device exists; returns paddle's device name."""
    import paddle

    available = {"cpu": True}
    available["gpu"] = paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
    available["xpu"] = paddle.device.is_compiled_with_xpu()
    available["npu"] = "npu" in paddle.device.get_all_custom_device_type()
    if name == "auto":
        name = next(d for d in ("gpu", "xpu", "npu", "cpu") if available[d])
    if not available[name]:
        raise SentiError(f"device '{name}' is not available to this paddle build (see `senti info`)")
    if name == "cpu":
        paddle.set_device("cpu")
    else:
        paddle.set_device(f"{name}:{paddle.distributed.ParallelEnv().device_id}")
    return name


def resolve_precision(config: TrainConfig, device: str, say) -> str:
    """The precision training will really use; says so when --amp cannot apply."""
    if not config.amp:
        return "fp32"
    if device == "cpu":
        say("--amp has no effect on CPU (Paddle's AMP runs only on accelerators): training in fp32")
        return "fp32"
    if config.amp_dtype == "bfloat16":
        import paddle

        if device == "gpu" and not paddle.amp.is_bfloat16_supported():
            raise SentiError("this GPU does not support bfloat16; use --amp-dtype float16")
        return "bf16"
    return "fp16"


class _StopFlag:
    """Turns SIGINT/SIGTERM into a flag checked between steps, so no step is cut in half."""

    def __init__(self):
        self.signal = None
        self._old = {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        self.signal = signal.Signals(signum).name

    def __exit__(self, *exc):
        for sig, old in self._old.items():
            signal.signal(sig, old)


def run_training(config: TrainConfig, say=print, progress=None) -> dict:
    """Train per `config`, keep the best dev checkpoint in `config.output_dir`, return the metrics."""
    runtime = configure_runtime(config.threads)
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F
    from paddlenlp.transformers import LinearDecayWithWarmup

    out = Path(config.output_dir)
    world, rank = dist.get_world_size(), dist.get_rank()
    main_process = rank == 0
    device = select_device(config.device)
    if world > 1:
        dist.init_parallel_env()
    splits = load_splits(config.dataset, text_column=config.text_column,
                         label_column=config.label_column, seed=config.seed)
    paddle.seed(config.seed)
    rng = np.random.default_rng(config.seed)
    model, tokenizer, source = build_model(
        config.model, splits.labels, [e.text for e in splits.train], config.max_seq_len
    )
    label_id = {lab: i for i, lab in enumerate(splits.labels)}
    train_ids, train_cut = encode_texts(tokenizer, [e.text for e in splits.train], config.max_seq_len)
    dev_ids, dev_cut = encode_texts(tokenizer, [e.text for e in splits.dev], config.max_seq_len)
    train_y = np.array([label_id[e.label] for e in splits.train], dtype=np.int64)
    dev_y = np.array([label_id[e.label] for e in splits.dev], dtype=np.int64)
    data_stats = {**splits.stats(), "truncated_texts": {"train": train_cut, "dev": dev_cut},
                  "max_seq_len": config.max_seq_len}
    if main_process:
        say(f"data: {len(train_ids)} train / {len(dev_ids)} dev rows, labels {splits.labels}; "
            f"truncated to {config.max_seq_len} tokens: {train_cut} train, {dev_cut} dev; "
            f"empty texts skipped: {sum(splits.skipped_empty.values())}")
    precision = resolve_precision(config, device, say if main_process else (lambda _: None))

    steps_per_epoch = len(train_ids) // config.batch_size // world or 1
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    schedule = LinearDecayWithWarmup(config.lr, total_steps, config.warmup)
    no_decay = {p.name for n, p in model.named_parameters() if "bias" in n or "norm" in n}
    optimizer = paddle.optimizer.AdamW(
        learning_rate=schedule, parameters=model.parameters(), weight_decay=config.weight_decay,
        apply_decay_param_fun=lambda name: name not in no_decay,
        grad_clip=paddle.nn.ClipGradByGlobalNorm(config.max_grad_norm),
    )
    scaler = paddle.amp.GradScaler(init_loss_scaling=config.init_loss_scaling) if precision == "fp16" else None
    amp_dtype = "bfloat16" if precision == "bf16" else "float16"  # ignored when AMP is off
    net = paddle.DataParallel(model) if world > 1 else model

    metrics = {
        "written_by": "senti train", "model": source, "device": device, "world_size": world,
        "precision": precision, "amp_requested": config.amp, "versions": versions(),
        "runtime": runtime, "data": data_stats, "epochs": [], "evaluations": [], "step_losses": [],
        "best": None, "interrupted": None, "stopped_early": False,
    }
    if main_process:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / layout.TRAIN_CONFIG, config.to_json())
    meta = {
        "written_by": "senti train", "labels": splits.labels, "max_seq_len": config.max_seq_len,
        "tokenizer": {"class": type(tokenizer).__name__, "vocab_file": layout.VOCAB,
                      "do_lower_case": bool(getattr(tokenizer, "do_lower_case", True))},
        "model": source, "versions": metrics["versions"],
    }

    def evaluate_and_keep_best(epoch: int, step: int) -> bool:
        """Evaluate on dev; save if best. Every rank evaluates, so early-stop decisions agree."""
        result = classification_metrics(dev_y, predict_logits(model, dev_ids).argmax(1), splits.labels)
        record = {"epoch": epoch, "step": step, "dev_accuracy": result["accuracy"],
                  "dev_macro_f1": result["macro_f1"]}
        metrics["evaluations"].append(record)
        best = metrics["best"]
        improved = best is None or (record["dev_accuracy"], record["dev_macro_f1"]) > (
            best["dev_accuracy"], best["dev_macro_f1"])
        if improved:
            metrics["best"] = record
            if main_process:
                save_checkpoint(model, tokenizer, out, {**meta, "dev": record, "precision": precision})
        if main_process:
            say(f"epoch {epoch} step {step}: dev accuracy {record['dev_accuracy']:.4f}, "
                f"macro-F1 {record['dev_macro_f1']:.4f}{'  (best, saved)' if improved else ''}")
        return improved

    step, stale = 0, 0
    with _StopFlag() as stop:
        for epoch in range(1, config.epochs + 1):
            batches = length_bucketed_batches([len(e) for e in train_ids], config.batch_size, rng)
            batches = batches[: steps_per_epoch * world][rank::world]
            net.train()
            started, samples, tokens, losses, stopped = time.perf_counter(), 0, 0, [], False
            task = progress.add_task(f"epoch {epoch}", total=len(batches)) if progress and main_process else None
            for index in batches:
                input_ids, token_type_ids = pad_batch(train_ids, index)
                labels = paddle.to_tensor(train_y[index])
                with paddle.amp.auto_cast(enable=precision != "fp32", dtype=amp_dtype, level="O1"):
                    logits = net(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids))
                loss = F.cross_entropy(logits.astype("float32"), labels)
                loss_value = float(loss)
                if not math.isfinite(loss_value):
                    raise TrainingDiverged(
                        f"loss became {loss_value} at epoch {epoch}, step {step + 1} ({precision}); "
                        f"lower --lr{' or train without --amp' if precision != 'fp32' else ''}. "
                        f"The best checkpoint so far is kept in {out}"
                    )
                if scaler:
                    scaler.scale(loss).backward()
                    scaler.minimize(optimizer, scaler.scale(loss))
                else:
                    loss.backward()
                    optimizer.step()
                optimizer.clear_grad()
                schedule.step()
                step += 1
                samples += len(index)
                tokens += int(sum(len(train_ids[i]) for i in index))
                losses.append(loss_value)
                metrics["step_losses"].append(loss_value)
                if task is not None:
                    progress.update(task, advance=1, description=f"epoch {epoch} loss {loss_value:.3f}")
                if config.eval_every and step % config.eval_every == 0:
                    stale = 0 if evaluate_and_keep_best(epoch, step) else stale + 1
                if stop.signal or (config.max_steps and step >= config.max_steps) or (
                        config.early_stop and stale >= config.early_stop):
                    stopped = True
                    break
            wall = time.perf_counter() - started
            if task is not None:
                progress.remove_task(task)
            if stop.signal:
                metrics["interrupted"] = {"signal": stop.signal, "epoch": epoch, "step": step}
                break
            if not config.eval_every:
                stale = 0 if evaluate_and_keep_best(epoch, step) else stale + 1
            last = metrics["evaluations"][-1] if metrics["evaluations"] else {}
            metrics["epochs"].append({
                "epoch": epoch, "steps": len(losses), "wall_seconds": wall,
                "train_samples_per_s": samples * world / wall, "train_tokens_per_s": tokens * world / wall,
                "train_loss": float(np.mean(losses)) if losses else None,
                "dev_accuracy": last.get("dev_accuracy"), "dev_macro_f1": last.get("dev_macro_f1"),
            })
            if config.early_stop and stale >= config.early_stop:
                metrics["stopped_early"] = True
                say(f"early stop: no dev improvement in {stale} evaluations")
                break
            if stopped:
                break

    if main_process:
        write_json_atomic(out / layout.METRICS, metrics)
        from toolkit.plots import plot_training_curves

        plot_training_curves(metrics, out / layout.CURVES_PNG)
    if metrics["interrupted"]:
        kept = f"best checkpoint (step {metrics['best']['step']}) kept in {out}" if metrics["best"] else \
            "no checkpoint had been saved yet"
        raise TrainingInterrupted(f"training interrupted by {stop.signal} at step {step}; {kept}")
    return metrics
