"""`senti pretrain`: masked-language-model pretraining of ERNIE in Paddle's dynamic graph.

From scratch (a character vocabulary built from the corpus) or continued from a checkpoint or a PaddleNLP
folder (its vocabulary kept). ERNIE's masking: 15% of tokens (80% [MASK], 10% random, 10% kept), whole
jieba words or single characters, drawn again every epoch. The output head scores only the masked
positions (`masked_positions`): over a character vocabulary it is most of a small model's cost.
The output folder is a PaddleNLP folder (`ErnieForMaskedLM`, safetensors) plus `senti.json`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from senti.core import layout
from senti.core.artifacts import write_json_atomic
from senti.core.errors import SentiError
from senti.core.sequence import text_budget
from senti.toolkit.config import RunConfig

MASKINGS = ("word", "char")
HELDOUT_SHARE = 0.01  # of the sequences, kept out of training for the MLM figures
HELDOUT_MAX = 2000
UNK_RATE_LIMIT = 0.5  # a continued model whose vocabulary misses half the corpus cannot learn from it
PRETRAIN_LR = 5e-4


@dataclass(kw_only=True)
class PretrainConfig(RunConfig):
    KIND: ClassVar[str] = "pretraining"
    FILE: ClassVar[str] = layout.PRETRAIN_CONFIG

    corpus: list[str]
    dataset: str = ""  # unused: pretraining reads --corpus
    model: str = "scratch:2l-128h"
    epochs: int = 1
    batch_size: int = 64
    max_seq_len: int = 128
    mask_rate: float = 0.15
    masking: str = "word"
    max_minutes: float | None = None
    save_every: int = 500  # steps between saves (resume points)
    min_freq: int = 1  # of a character, to enter a from-scratch vocabulary
    snapshots: bool = False  # keep a copy of every save in snapshots/step-N (for quality-by-minutes curves)

    def checks(self):
        return super().checks() + [
            (bool(self.corpus), "at least one --corpus is needed"),
            (0 < self.mask_rate < 1, "mask_rate must be in (0, 1)"),
            (self.masking in MASKINGS, f"masking must be one of {', '.join(MASKINGS)}"),
            (self.max_minutes is None or self.max_minutes > 0, "max_minutes must be positive"),
            (self.save_every >= 1, "save_every must be at least 1"),
            (self.min_freq >= 1, "min_freq must be at least 1"),
        ]


def mask_batch(seqs: list[np.ndarray], starts: list[np.ndarray], rng: np.random.Generator, *, vocab_size: int,
               mask_id: int, first_normal_id: int, rate: float, whole_word: bool, cls_id: int, sep_id: int,
               pad_id: int = 0):
    """(input ids [B, L], flat masked positions, original ids there) for one batch, ERNIE's 80/10/10 rule.

    Units (whole words, or characters) are chosen with probability `rate`, at least one per sequence."""
    width = max(len(s) for s in seqs) + 2
    ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    positions, labels = [], []
    for b, (seq, start) in enumerate(zip(seqs, starts)):
        n = len(seq)
        ids[b, 0], ids[b, 1:n + 1], ids[b, n + 1] = cls_id, seq, sep_id
        if whole_word:
            unit = np.cumsum(np.maximum(start, np.arange(n) == 0)) - 1
        else:
            unit = np.arange(n)
        chosen = rng.random(unit[-1] + 1) < rate
        if not chosen.any():
            chosen[rng.integers(len(chosen))] = True
        where = np.flatnonzero(chosen[unit])
        labels.append(seq[where].astype(np.int64))
        roll = rng.random(len(where))
        tokens = np.where(roll < 0.8, mask_id, np.where(roll < 0.9, rng.integers(first_normal_id, vocab_size,
                                                                                   len(where)), seq[where]))
        ids[b, where + 1] = tokens
        positions.append(b * width + where + 1)
    return ids, np.concatenate(positions), np.concatenate(labels)


@dataclass
class PretrainMeta:
    """`senti.json` of a pretrained folder: `kind: pretrained`, the corpus, the masking, held-out MLM figures."""

    FILE: ClassVar[str] = layout.CHECKPOINT_META
    max_seq_len: int
    tokenizer: dict
    model: dict
    corpus: dict
    steps: int
    masking: dict
    heldout: dict | None
    versions: dict
    kind: str = "pretrained"
    written_by: str = "senti pretrain"
    meta_version: int = layout.META_VERSION
    elapsed_minutes: float = 0.0
    lineage: dict | None = None
    extra: dict = field(default_factory=dict)

    def write(self, folder: Path) -> None:
        from dataclasses import asdict

        write_json_atomic(Path(folder) / self.FILE, asdict(self))


def _start_model(config: PretrainConfig, say):
    """(ErnieForMaskedLM, tokenizer, vocab file, source) from scratch or from a folder with its vocabulary."""
    from paddlenlp.transformers import ErnieForMaskedLM, ErnieTokenizer

    from senti.toolkit.models import PRESETS, SHAPES, build_char_vocab, ernie_config, pretrained_folder

    spec = config.model
    if spec in PRESETS or spec.startswith("scratch:"):
        if spec not in PRESETS:
            raise SentiError(f"unknown preset '{spec}'; choose scratch:<shape> with a shape from {', '.join(SHAPES)}")
        from senti.toolkit.corpus import corpus_texts

        texts = (t for c in config.corpus for t, _ in corpus_texts(c, config.seed))
        vocab = build_char_vocab(texts, config.min_freq)
        import tempfile

        folder = tempfile.TemporaryDirectory(prefix="senti-vocab-")
        vocab_file = Path(folder.name) / layout.VOCAB
        vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
        tokenizer = ErnieTokenizer(str(vocab_file))
        tokenizer._senti_vocab_folder = folder
        model_config = ernie_config(PRESETS[spec], len(vocab), ["_"], config.max_seq_len)
        say(f"from scratch: {PRESETS[spec]}, a vocabulary of {len(vocab)} tokens built from the corpus")
        return ErnieForMaskedLM(model_config), tokenizer, vocab_file, {"source": "scratch", "shape": PRESETS[spec]}
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise SentiError(f"--model {spec}: pretraining starts from scratch:<shape>, a checkpoint or a PaddleNLP "
                         "model folder")
    model, tokenizer, report = pretrained_folder(path, ErnieForMaskedLM, config.trust_pickle)
    say(f"continuing {path}: {report}")
    return model, tokenizer, path / layout.VOCAB, {"source": "continued", "path": str(path.resolve())}


def run_pretraining(config: PretrainConfig, say=print, progress=None) -> dict:
    """Pretrain per `config` into `config.output_dir`; returns the metrics (also in metrics.json)."""
    from senti.core.runtime import configure_runtime

    runtime = configure_runtime(config.threads)
    import paddle
    import paddle.distributed as dist
    import paddle.nn.functional as F

    from senti.serving.tokenizer import FastTokenizer
    from senti.toolkit.checkpoint import refuse_existing, save_checkpoint, versions
    from senti.toolkit.corpus import tokenize_corpus
    from senti.toolkit.loop import StopFlag, make_optimizer, optimizer_step

    world, rank = dist.get_world_size(), dist.get_rank()
    main = rank == 0  # rank 0 alone tokenizes, evaluates and writes
    if world > 1:
        dist.init_parallel_env()
    say = say if main else (lambda _: None)
    out = Path(config.output_dir)
    state = _resume_state(out) if not config.overwrite else None
    if state is None:
        refuse_existing(out, config.overwrite)
    if config.lr is None:
        config = replace(config, lr=PRETRAIN_LR)
    paddle.seed(config.seed)
    model, tokenizer, vocab_file, source = _start_model(config, say)
    if state is not None:
        from senti.toolkit.models import load_weights

        load_weights(model, out)
        say(f"resuming {out} at step {state['step']}")
    fast = FastTokenizer(vocab_file, do_lower_case=bool(getattr(tokenizer, "do_lower_case", True)))
    cache = out / ".corpus"
    started = time.perf_counter()
    if main:
        corpus = tokenize_corpus(config.corpus, fast, cache, text_budget(config.max_seq_len), config.seed,
                                 words=config.masking == "word")
    if world > 1:
        dist.barrier()
        if not main:
            from senti.toolkit.corpus import TokenizedCorpus

            corpus = TokenizedCorpus.open(cache)
    stats = corpus.stats
    say(f"corpus: {stats['texts']:,} texts, {stats['sequences']:,} sequences, {stats['tokens']:,} tokens "
        f"({time.perf_counter() - started:.0f} s to tokenize); [UNK] rate {stats['unk_rate']:.2%}")
    if stats["unk_rate"] > UNK_RATE_LIMIT:
        raise SentiError(f"corpus {', '.join(config.corpus)}: {stats['unk_rate']:.0%} of its tokens are [UNK] under "
                         f"{config.model}'s vocabulary; pretrain from scratch:<shape> instead")
    order = np.random.default_rng(config.seed).permutation(len(corpus))
    n_held = min(HELDOUT_MAX, max(1, int(len(corpus) * HELDOUT_SHARE))) if len(corpus) > 1 else 0
    heldout, train_index = order[:n_held], order[n_held:] if n_held else order
    lengths = corpus.lengths()
    mask_id = tokenizer.convert_tokens_to_ids("[MASK]")
    specials = (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id, mask_id)
    masking = dict(vocab_size=fast.vocab_size, mask_id=mask_id, first_normal_id=max(specials) + 1,
                   rate=config.mask_rate, whole_word=config.masking == "word", cls_id=tokenizer.cls_token_id,
                   sep_id=tokenizer.sep_token_id, pad_id=tokenizer.pad_token_id)

    def batch(index, rng):
        seqs = [np.asarray(corpus.ids[corpus.offsets[i]:corpus.offsets[i + 1]]) for i in index]
        starts = [np.asarray(corpus.word_start[corpus.offsets[i]:corpus.offsets[i + 1]]) for i in index]
        return mask_batch(seqs, starts, rng, **masking)

    net = paddle.DataParallel(model) if world > 1 else model

    def loss_and_hits(ids, positions, labels, layer=model):
        scores = layer(paddle.to_tensor(ids), masked_positions=paddle.to_tensor(positions))
        target = paddle.to_tensor(labels)
        return F.cross_entropy(scores, target), (scores.argmax(-1) == target).astype("float32").sum()

    held_batches = [batch(heldout[i:i + config.batch_size], np.random.default_rng([config.seed, 1, i]))
                    for i in range(0, len(heldout), config.batch_size)]

    def evaluate() -> dict | None:
        if not held_batches:
            return None
        model.eval()
        total = hits = loss_sum = 0.0
        with paddle.no_grad():
            for ids, positions, labels in held_batches:
                loss, hit = loss_and_hits(ids, positions, labels)
                loss_sum += float(loss) * len(labels)
                hits += float(hit)
                total += len(labels)
        model.train()
        return {"mlm_loss": loss_sum / total, "masked_accuracy": hits / total, "masked_tokens": int(total)}

    steps_per_epoch = max(1, len(train_index) // config.batch_size // world)
    total_steps = config.epochs * steps_per_epoch
    if config.max_steps:
        total_steps = min(total_steps, config.max_steps)
    optimizer, schedule = make_optimizer(list(model.named_parameters()), config, total_steps)
    metrics = state["metrics"] if state else {
        "written_by": "senti pretrain", "model": source, "corpus": stats, "runtime": runtime, "world_size": world,
        "versions": versions(), "steps": [], "evaluations": [], "interrupted": None}
    step = 0
    if state:
        _load_optimizer(optimizer, model, out)
        step = state["step"]
        for _ in range(step):
            schedule.step()
    meta = PretrainMeta(max_seq_len=config.max_seq_len, model=source, versions=metrics["versions"], steps=step,
                        tokenizer={"class": type(tokenizer).__name__, "vocab_file": layout.VOCAB,
                                   "do_lower_case": bool(getattr(tokenizer, "do_lower_case", True))},
                        corpus={"sources": stats["corpora"], "fingerprint": stats["fingerprint"],
                                "tokens": stats["tokens"], "sequences": stats["sequences"],
                                "unk_rate": stats["unk_rate"]},
                        masking={"kind": config.masking, "rate": config.mask_rate, "split": "80/10/10"},
                        heldout=None)
    budget = config.max_minutes * 60 if config.max_minutes else None
    prior_minutes = state["elapsed_minutes"] if state else 0.0
    run_start = time.perf_counter()

    def save() -> None:
        record = evaluate()
        if record:
            metrics["evaluations"].append({"step": step, **record})
        elapsed = prior_minutes + (time.perf_counter() - run_start) / 60
        saved = replace(meta, steps=step, heldout=record, elapsed_minutes=round(elapsed, 2))
        save_checkpoint(model, tokenizer, out, saved, config,
                        extra={layout.PRETRAIN_STATE: lambda d: _save_state(optimizer, model, d, step, elapsed, metrics)})
        write_json_atomic(out / layout.METRICS, metrics)
        _keep_text_hashes(cache, out)
        if config.snapshots:
            _snapshot(out, step)
        if record:
            say(f"step {step}: held-out MLM loss {record['mlm_loss']:.3f}, masked-token accuracy "
                f"{record['masked_accuracy']:.3f}; saved")

    model.train()
    task = progress.add_task("pretraining", total=total_steps, completed=step) if progress else None
    tokens_done, timed_start = 0, time.perf_counter()
    stopping = False
    with StopFlag() as stop:
        epoch = step // steps_per_epoch
        while step < total_steps:
            batches = _epoch_batches(train_index, lengths, config.batch_size, config.seed, epoch)
            batches = batches[: steps_per_epoch * world][rank::world]  # each worker its own share of the epoch
            for index in batches[step - epoch * steps_per_epoch:]:
                ids, positions, labels = batch(index, np.random.default_rng([config.seed, 0, step, rank]))
                loss, _ = loss_and_hits(ids, positions, labels, net)
                value = float(loss)
                if not np.isfinite(value):
                    raise SentiError(f"MLM loss became {value} at step {step + 1}; lower --lr")
                optimizer_step(loss, optimizer)
                schedule.step()
                step += 1
                tokens_done += int(ids.shape[0] * ids.shape[1])
                rate = tokens_done / (time.perf_counter() - timed_start)
                metrics["steps"].append({"step": step, "loss": value, "tokens_per_s": rate})
                if task is not None:
                    progress.update(task, completed=step, description=f"MLM loss {value:.3f} {rate:,.0f} tok/s")
                over_time = budget is not None and prior_minutes * 60 + time.perf_counter() - run_start >= budget
                stopping = _agree(bool(stop.signal) or over_time, world)  # every worker stops at the same step
                if main and (step % config.save_every == 0 or step >= total_steps or stopping):
                    save()
                if stopping or step >= total_steps:
                    break
            if stopping:
                if stop.signal:
                    metrics["interrupted"] = {"signal": stop.signal, "step": step}
                    write_json_atomic(out / layout.METRICS, metrics)
                break
            epoch += 1
    if main:
        _plot(metrics, out / layout.CURVES_PNG)
    if metrics["interrupted"]:
        from senti.toolkit.loop import TrainingInterrupted

        raise TrainingInterrupted(f"pretraining interrupted by {stop.signal} at step {step}; the folder {out} "
                                  "holds that step and resumes from it")
    return metrics


def _agree(flag: bool, world: int) -> bool:
    """True on every worker when it is true on any (a signal or the time budget reached one of them)."""
    if world == 1:
        return flag
    import paddle
    import paddle.distributed as dist

    value = paddle.to_tensor([int(flag)])
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.numpy().max())


def _epoch_batches(index: np.ndarray, lengths: np.ndarray, batch_size: int, seed: int, epoch: int):
    """Length-bucketed batches of `index` (shuffled per epoch, tight in length), whole batches only."""
    from senti.toolkit.batching import length_bucketed_batches

    rng = np.random.default_rng([seed, 2, epoch])
    local = length_bucketed_batches(lengths[index], batch_size, rng)
    return [index[b] for b in local if len(b) == batch_size]


def _resume_state(out: Path) -> dict | None:
    """The saved step, elapsed minutes and metrics of an unfinished run in `out`, or None."""
    from safetensors import safe_open

    state, meta = out / layout.PRETRAIN_STATE, out / layout.CHECKPOINT_META
    if not (state.is_file() and meta.is_file()):
        return None
    with safe_open(str(state), framework="numpy") as fh:
        data = json.loads(fh.metadata()["state"])
    if json.loads(meta.read_text(encoding="utf-8")).get("steps") != data["step"]:
        return None  # the weights and the optimizer state disagree: starting over is safer than a wrong resume
    return data


def _structured_names(model) -> dict[str, str]:
    """Paddle keys optimizer state by each parameter's unique name (`linear_3.w_0`), which depends on how many
    layers the process built before; the structured name (`ernie.encoder...`) does not."""
    return {p.name: n for n, p in model.named_parameters()}


def _rename(key: str, names: dict[str, str]) -> str:
    for old in sorted(names, key=len, reverse=True):  # longest first: linear_11.w_0 before linear_1.w_0
        if key.startswith(old + "_"):
            return names[old] + key[len(old):]
    return key


def _save_state(optimizer, model, path: Path, step: int, elapsed: float, metrics: dict) -> None:
    """Optimizer moments as safetensors (loading runs no code), the step and metrics in its metadata."""
    from safetensors.numpy import save_file

    names = _structured_names(model)
    tensors = {_rename(k, names): np.ascontiguousarray(v.numpy()) for k, v in optimizer.state_dict().items()
               if hasattr(v, "numpy")}
    state = {"step": step, "elapsed_minutes": elapsed, "metrics": metrics}
    save_file(tensors, str(path), metadata={"state": json.dumps(state)})


def _load_optimizer(optimizer, model, out: Path) -> None:
    import paddle
    from safetensors.numpy import load_file

    names = {n: p for p, n in _structured_names(model).items()}
    tensors = load_file(str(out / layout.PRETRAIN_STATE))
    optimizer.set_state_dict({_rename(k, names): paddle.to_tensor(v) for k, v in tensors.items()})


def _keep_text_hashes(cache: Path, out: Path) -> None:
    """The pretraining texts' hashes beside the weights (fine-tuning counts its dev and test texts among them)."""
    import os
    import shutil

    tmp = out / f".{layout.PRETRAIN_TEXT_HASHES}.tmp"
    shutil.copyfile(cache / "text_hashes.npy", tmp)
    os.replace(tmp, out / layout.PRETRAIN_TEXT_HASHES)


def _snapshot(out: Path, step: int) -> None:
    """Copy the model files just saved into snapshots/step-N (no optimizer state: a snapshot fine-tunes, not resumes)."""
    import shutil

    target = out / "snapshots" / f"step-{step}"
    target.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():
        if f.is_file() and f.name != layout.PRETRAIN_STATE:
            shutil.copy2(f, target / f.name)


def _plot(metrics: dict, path: Path) -> None:
    from senti.toolkit.plots import plot_pretraining_curves

    plot_pretraining_curves(metrics, path)
