"""`senti train`: fine-tune an ERNIE classifier in Paddle's dynamic graph, one device or data-parallel."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from senti.core import layout
from senti.core.artifacts import SplitRecipe, write_json_atomic
from senti.core.batching import pad_batch
from senti.core.checkpoint import CheckpointMeta
from senti.core.errors import SentiError
from senti.core.runtime import configure_runtime
from senti.toolkit.batching import encode_texts
from senti.toolkit.checkpoint import refuse_existing, save_checkpoint, versions
from senti.toolkit.config import TrainConfig
from senti.toolkit.data import data_fingerprint, load_recipe
from senti.toolkit.evaluate import choose_ngram_weight, classification_metrics, predict_logits
from senti.toolkit.loop import fit, raise_if_interrupted
from senti.toolkit.models import build_model, default_lr


def available_devices() -> dict[str, bool]:
    """Which of senti's devices this paddle build can use."""
    import paddle

    return {
        "cpu": True,
        "gpu": paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0,
        "xpu": paddle.device.is_compiled_with_xpu(),
        "npu": "npu" in paddle.device.get_all_custom_device_type(),
    }


def launcher_device(name: str) -> str:
    """`auto` resolved for `paddle.distributed.launch`, which must know whether it starts CPU processes
    or one per accelerator: a GPU when one is visible, else the CPU."""
    if name != "auto":
        return name
    return "gpu" if available_devices()["gpu"] else "cpu"


def select_device(name: str) -> str:
    """Resolve `auto` and check that the requested device exists; returns paddle's device name."""
    import paddle

    available = available_devices()
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


def run_training(config: TrainConfig, say=print, progress=None) -> dict:
    """Train per `config`, keep the best dev checkpoint in `config.output_dir`, return the metrics."""
    runtime = configure_runtime(config.threads)
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    out = Path(config.output_dir)
    refuse_existing(out, config.overwrite)
    world, rank = dist.get_world_size(), dist.get_rank()
    main_process = rank == 0
    if config.lr is None:
        lr, why = default_lr(config.model)
        config = replace(config, lr=lr)
        if main_process:
            say(f"learning rate {lr:g}: {why}; --lr sets another")
    device = select_device(config.device)
    if world > 1:
        dist.init_parallel_env()
    recipe = SplitRecipe(dataset=config.dataset, seed=config.seed, text_column=config.text_column,
                         label_column=config.label_column,
                         fingerprint=data_fingerprint(config.dataset, config.text_column, config.label_column))
    splits = load_recipe(recipe)
    labels, replayed, lineage = continuation(config, splits)
    if main_process:
        for note in (lineage or {}).get("replay_notes", []):
            say(note)
    train_rows = splits.train + replayed
    paddle.seed(config.seed)
    model, tokenizer, source = build_model(
        config.model, labels, [e.text for e in train_rows], config.max_seq_len, config.trust_pickle,
        config.ngram_buckets,
    )
    two_sided = hasattr(model, "ngram_table")
    label_id = {lab: i for i, lab in enumerate(labels)}
    train_ids, train_cut = encode_texts(tokenizer, [e.text for e in train_rows], config.max_seq_len)
    dev_ids, dev_cut = encode_texts(tokenizer, [e.text for e in splits.dev], config.max_seq_len)
    train_y = np.array([label_id[e.label] for e in train_rows], dtype=np.int64)
    dev_y = np.array([label_id[e.label] for e in splits.dev], dtype=np.int64)
    data_stats = {**splits.stats(), "replayed_rows": len(replayed), "truncated_texts": {"train": train_cut, "dev": dev_cut},
                  "max_seq_len": config.max_seq_len}
    if main_process:
        replay_note = f" ({len(replayed)} replayed from {config.replay})" if replayed else ""
        say(f"data: {len(train_ids)} train{replay_note} / {len(dev_ids)} dev rows, labels {labels}; "
            f"truncated to {config.max_seq_len} tokens: {train_cut} train, {dev_cut} dev; "
            f"empty texts skipped: {sum(splits.skipped_empty.values())}")
        for label, n in splits.rare_labels.items():
            say(f"warning: label '{label}' has only {n} training row(s); check the label column for typos")
        if source.get("loaded"):
            say(f"{config.model}: {source['loaded']}")
        overlap = pretraining_overlap(Path(config.model), splits)
        if overlap is not None:
            data_stats["pretraining_overlap"] = overlap
            say(f"{config.model} was pretrained on {overlap['dev']} of the {len(splits.dev)} dev texts and "
                f"{overlap['test']} of the {len(splits.test)} test texts (their labels were never seen)")
    precision = resolve_precision(config, device, say if main_process else (lambda _: None))
    baseline = fit_baseline_figures(splits, train_rows, labels, config.seed, say) if (
        config.baseline and main_process) else None

    net = paddle.DataParallel(model) if world > 1 else model
    metrics = {
        "written_by": "senti train", "model": source, "device": device, "world_size": world,
        "precision": precision, "amp_requested": config.amp, "versions": versions(),
        "runtime": runtime, "data": data_stats, "baseline": baseline,
    }
    if main_process:
        out.mkdir(parents=True, exist_ok=True)  # the settings are saved with the first checkpoint, not before
    meta = checkpoint_meta("senti train", labels, config.max_seq_len, tokenizer, source, metrics["versions"],
                           recipe, lineage)

    def loss_fn(index):
        input_ids, token_type_ids = pad_batch(train_ids, index)
        gold = paddle.to_tensor(train_y[index])
        if two_sided:  # ERNIE and the n-gram head each learn on their own loss (core.ngram_head)
            deep, wide = net(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids),
                             return_parts=True)
            deep_loss, wide_loss = F.cross_entropy(deep.astype("float32"), gold), F.cross_entropy(wide, gold)
            return deep_loss + wide_loss, {"ernie": float(deep_loss), "ngram": float(wide_loss)}
        logits = net(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids))
        return F.cross_entropy(logits.astype("float32"), gold), None

    def evaluate(epoch: int, step: int) -> dict:
        extra = choose_ngram_weight(model, dev_ids, dev_y) if two_sided else {}
        result = classification_metrics(dev_y, predict_logits(model, dev_ids).argmax(1), labels)
        return {"epoch": epoch, "step": step, "dev_accuracy": result["accuracy"], "dev_macro_f1": result["macro_f1"],
                **extra}

    def save(record: dict) -> None:
        save_checkpoint(model, tokenizer, out, replace(meta, dev=record, precision=precision), config)

    fit(net, model, config, [len(e) for e in train_ids], loss_fn, evaluate, save, precision, metrics,
        say=say if main_process else (lambda _: None), progress=progress)
    if main_process:
        finish_run(out, metrics)
    raise_if_interrupted(metrics, out)
    return metrics


def pretraining_overlap(folder: Path, splits) -> dict | None:
    """How many dev and test texts the pretrained folder's corpus held, or None when it records no texts."""
    from senti.toolkit.corpus import text_hash

    hashes_file = folder / layout.PRETRAIN_TEXT_HASHES
    if not hashes_file.is_file():
        return None
    seen = np.load(hashes_file, allow_pickle=False)
    return {name: int(np.isin(np.array([text_hash(e.text) for e in rows], dtype=np.uint64), seen).sum())
            for name, rows in (("dev", splits.dev), ("test", splits.test))}


def fit_baseline_figures(splits, train_rows, labels, seed: int, say) -> dict:
    """The char n-gram baseline on the very training rows, scored on dev; said in one line."""
    from senti.toolkit.baseline import baseline_figures

    record = baseline_figures([e.text for e in train_rows], [e.label for e in train_rows], labels,
                              {"dev": ([e.text for e in splits.dev], [e.label for e in splits.dev])}, seed)
    say(f"baseline ({record['model']}, fitted in {record['fit_seconds']:.0f} s): dev accuracy "
        f"{record['dev']['accuracy']:.4f}, macro-F1 {record['dev']['macro_f1']:.4f}; --no-baseline skips it")
    return record


def checkpoint_meta(written_by: str, labels, max_seq_len: int, tokenizer, source: dict, versions: dict,
                    recipe: SplitRecipe | None, lineage: dict | None = None) -> CheckpointMeta:
    """A checkpoint's senti.json (the dev record is added at each save); `recipe`: how its data was split;
    `lineage`: the parent checkpoint and the datasets it was continued on."""
    return CheckpointMeta(
        written_by=written_by, labels=list(labels), max_seq_len=max_seq_len,
        tokenizer={"class": type(tokenizer).__name__, "vocab_file": layout.VOCAB,
                   "do_lower_case": bool(getattr(tokenizer, "do_lower_case", True))},
        model=source, versions=versions, data=asdict(recipe) if recipe else None, lineage=lineage,
    )


def continuation(config: TrainConfig, splits) -> tuple[list[str], list, dict | None]:
    """(label set, replayed rows, lineage). Continuing from a checkpoint keeps its labels (a label it does not
    know is an error naming it) and records the parent; `--replay` mixes a seeded sample of old training rows
    (`replay_ratio` x the new training rows) in, against forgetting."""
    import hashlib

    from senti.toolkit.models import is_checkpoint

    parent = Path(config.model).expanduser()
    if not parent.is_dir() or not is_checkpoint(parent):
        if config.replay:
            raise SentiError("--replay continues a checkpoint: --model must be a senti checkpoint folder")
        return splits.labels, [], None
    from senti.core.checkpoint import read_meta

    parent_meta = read_meta(parent)
    labels = parent_meta.labels
    new = sorted(set(splits.labels) - set(labels))
    if new:
        raise SentiError(f"{config.dataset}: label(s) {', '.join(new)} are not among the checkpoint's labels "
                         f"({', '.join(labels)}); a model continued from a checkpoint keeps its label set")
    replayed, notes = [], []
    if config.replay:
        replayed, notes = _replay_rows(config, parent_meta.splits, splits, labels)
    lineage = {"parent": str(parent.resolve()),
               "parent_version": hashlib.sha256((parent / layout.CHECKPOINT_META).read_bytes()).hexdigest()[:12],
               "parent_data": parent_meta.data, "dataset": config.dataset, "replay": config.replay,
               "replay_ratio": config.replay_ratio if config.replay else None, "replayed_rows": len(replayed),
               "replay_notes": notes}
    return labels, replayed, lineage


def _replay_rows(config: TrainConfig, recipe, splits, labels) -> tuple[list, list[str]]:
    """A seeded sample of the old data's training rows, and what the user should know about it. The parent's
    data is recognised by its rows' fingerprint (whatever the path) and cut as it was; any other data has every
    text of the parent's dev and test splits taken out, so no held-out row of the parent is trained on."""
    import random

    fingerprint = data_fingerprint(config.replay)
    same = recipe is not None and (recipe.fingerprint == fingerprint if recipe.fingerprint else
                                   Path(recipe.dataset).expanduser().resolve() == Path(config.replay).expanduser().resolve())
    old = load_recipe(recipe) if same else load_recipe(SplitRecipe(dataset=config.replay, seed=config.seed))
    unknown = sorted(set(old.labels) - set(labels))
    if unknown:
        raise SentiError(f"--replay {config.replay}: label(s) {', '.join(unknown)} are not among the "
                         f"checkpoint's labels ({', '.join(labels)})")
    notes, pool = [], old.train
    if not same and recipe is not None:
        try:
            parent = load_recipe(recipe)
        except SentiError:
            parent = None
            notes.append(f"--replay {config.replay}: the parent's data ({recipe.dataset}) cannot be read, so its "
                         "dev and test rows cannot be kept out of the replay; replay the data it was trained on")
        if parent is not None:
            held = {e.text for e in parent.dev + parent.test}
            pool = [e for e in old.train if e.text not in held]
            if len(pool) < len(old.train):
                notes.append(f"--replay {config.replay}: {len(old.train) - len(pool)} rows left out, they are in the "
                             "parent's dev or test split")
    if fingerprint == data_fingerprint(config.dataset, config.text_column, config.label_column):
        notes.append(f"--replay {config.replay} is the new dataset itself: every replayed row is a second copy")
    want = round(config.replay_ratio * len(splits.train))
    if want == 0:
        notes.append(f"--replay-ratio {config.replay_ratio:g} x {len(splits.train)} new training rows replays no row")
    elif want > len(pool):
        notes.append(f"--replay-ratio {config.replay_ratio:g} asks for {want} rows; the old training rows are "
                     f"{len(pool)}, all replayed")
    return random.Random(config.seed).sample(pool, min(want, len(pool))), notes


def finish_run(out: Path, metrics: dict) -> None:
    """metrics.json and the curves PNG, also after an interruption."""
    from senti.toolkit.plots import plot_training_curves

    write_json_atomic(out / layout.METRICS, metrics)
    plot_training_curves(metrics, out / layout.CURVES_PNG)
