"""`senti pretrain`: masked-language-model pretraining of ERNIE in Paddle's dynamic graph.

From scratch (a character vocabulary built from the corpus) or continued from a checkpoint or a PaddleNLP
folder (its vocabulary kept). ERNIE's masking: 15% of tokens (80% [MASK], 10% random, 10% kept), whole
jieba words or single characters, drawn again every epoch. The output head scores only the masked
positions (`masked_positions`): over a character vocabulary it is most of a small model's cost.
The output folder is a PaddleNLP folder (`ErnieForMaskedLM`, safetensors) plus `senti.json`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, Record, TokenizerSettings
from senti.core.checkpoint import ModelSource, Parallel
from senti.core.errors import SentiError
from senti.core.runtime import runtime_record
from senti.core.sequence import text_budget
from senti.serving.tokenizer import FastTokenizer
from senti.toolkit.data.corpus import TokenizedCorpus, tokenize_corpus
from senti.toolkit.records import CorpusSource, CorpusStats, HeldoutFigures, PretrainMetrics, PretrainStep
from senti.toolkit.training.callbacks import Callback, ProgressBar, SaveCadence, TimeBudget
from senti.toolkit.training.checkpoint import save_checkpoint, versions
from senti.toolkit.training.collective import node_of, nodes
from senti.toolkit.training.config import RunConfig
from senti.toolkit.training.masking import MASKINGS, Masking, mask_batch
from senti.toolkit.training.models import load_weights
from senti.toolkit.training.plots import plot_pretraining_curves
from senti.toolkit.training.resume import load_optimizer, save_state
from senti.toolkit.training.run import Run, Step, resolve_precision

HELDOUT_SHARE = 0.01  # of the sequences, kept out of training for the MLM figures
HELDOUT_MAX = 2000
UNK_RATE_LIMIT = 0.5  # a continued model whose vocabulary misses half the corpus cannot learn from it
PRETRAIN_LR = 5e-4


TOKENIZING_SAID_S = 30.0  # how often `senti pretrain` says how far tokenizing the corpus is


@dataclass(kw_only=True)
class PretrainConfig(RunConfig):
    KIND: ClassVar[str] = "pretraining"
    FILE: ClassVar[str] = layout.PRETRAIN_CONFIG

    corpus: list[str]
    model: str = "scratch:2l-128h"
    epochs: int = 1
    batch_size: int = 64
    max_seq_len: int = 128
    mask_rate: float = 0.15
    masking: str = "word"
    max_minutes: float | None = None
    # --max-minutes without --epochs or --max-steps: the run lasts the minutes, its schedule shaped to them
    # (it stopped after its one-epoch schedule: a user who gave 30 minutes got 15)
    fill_minutes: bool = False
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


@dataclass
class PretrainMeta(ArtifactMeta):
    """`senti.json` of a pretrained folder: `kind: pretrained`, the corpus, the masking, held-out MLM figures."""

    FILE: ClassVar[str] = layout.CHECKPOINT_META
    KIND: ClassVar[str] = "pretrained model"
    NESTED: ClassVar[dict[str, Callable[[Any], Any]]] = {"tokenizer": TokenizerSettings.from_json}
    max_seq_len: int
    tokenizer: TokenizerSettings
    model: ModelSource
    corpus: CorpusRecord
    steps: int
    masking: MaskingRecord
    heldout: HeldoutFigures | None
    versions: dict[str, str]
    kind: str = "pretrained"
    written_by: str = "senti pretrain"
    meta_version: int = layout.META_VERSION
    elapsed_minutes: float = 0.0
    parallel: Parallel | None = None


@dataclass
class CorpusRecord(Record):
    """What a pretrained folder was pretrained on."""

    sources: list[CorpusSource]
    fingerprint: str
    tokens: int
    sequences: int
    unk_rate: float


@dataclass
class MaskingRecord(Record):
    """How tokens were masked: whole words or characters, the rate, the [MASK] / random / kept split."""

    kind: str
    rate: float
    split: str


def _start_model(config: PretrainConfig, say):
    """(ErnieForMaskedLM, tokenizer, vocab file, source) from scratch or from a folder with its vocabulary."""
    from paddlenlp.transformers import ErnieForMaskedLM, ErnieTokenizer

    from senti.core.json_tokenizer import is_json_tokenizer_folder
    from senti.toolkit.training.models import (
        PRESETS,
        SHAPES,
        build_char_vocab,
        ernie_config,
        pretrained_folder,
        readable_folder,
    )

    spec = config.model
    if spec in PRESETS or spec.startswith("scratch:"):
        if spec not in PRESETS:
            raise SentiError(f"unknown preset '{spec}'; choose scratch:<shape> with a shape from {', '.join(SHAPES)}")
        from senti.toolkit.data.corpus import corpus_texts

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
        return ErnieForMaskedLM(model_config), tokenizer, vocab_file, ModelSource("scratch", shape=PRESETS[spec])
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise SentiError(f"--model {spec}: pretraining starts from scratch:<shape>, a checkpoint or a PaddleNLP "
                         "model folder")
    readable, keep, note = readable_folder(path)
    if is_json_tokenizer_folder(readable):
        raise SentiError(f"--model {spec}: its tokenizer is its own tokenizer.json (not a WordPiece vocab.txt); "
                         "senti pretrain masks WordPiece vocabularies only so far (senti train reads it)")
    model, tokenizer, report = pretrained_folder(readable, ErnieForMaskedLM, config.trust_pickle and keep is None)
    if keep is not None:
        tokenizer._senti_vocab_folder = keep
    say(f"continuing {path}: {report}{note}")
    return model, tokenizer, readable / layout.VOCAB, ModelSource("continued", path=str(path.resolve()))


class PretrainRun(Run[PretrainConfig]):
    """One pretraining run: the corpus and held-out batches, the model, masking, saving every `save_every` steps
    (a resume point), resuming, and a time budget; `Run` owns the loop. With several workers
    (paddle.distributed.launch) rank 0 alone evaluates and writes; each node's first worker tokenizes."""

    task_name = "pretraining"
    resumable = True  # a folder holding this run's resume state is resumed, unless --overwrite
    saved_step: int | None = None

    def prepare(self) -> None:
        import paddle

        config = self.config
        paddle.seed(config.seed)
        self.precision = resolve_precision(config, self.device, self.say)
        self.model, self.tokenizer, vocab_file, self.source = _start_model(config, self.say)
        if self.state is not None:
            load_weights(self.model, self.out)
            self.say(f"resuming {self.out} at step {self.state['step']}")
        self.fast = FastTokenizer(vocab_file, do_lower_case=bool(getattr(self.tokenizer, "do_lower_case", True)))
        self.corpus = self._tokenize()
        tokenizer = self.tokenizer  # the masking settings, fixed for the run (not looked up per batch)
        mask_id = tokenizer.convert_tokens_to_ids("[MASK]")
        specials = (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.sep_token_id, mask_id)
        self.masking = Masking(vocab_size=self.fast.vocab_size, mask_id=mask_id, first_normal_id=max(specials) + 1,
                               rate=config.mask_rate, whole_word=config.masking == "word",
                               cls_id=tokenizer.cls_token_id, sep_id=tokenizer.sep_token_id,
                               pad_id=tokenizer.pad_token_id)
        self.hashes_kept = False
        self.vocab_sha256 = hashlib.sha256(Path(vocab_file).read_bytes()).hexdigest()
        order = np.random.default_rng(config.seed).permutation(len(self.corpus))
        n_held = min(HELDOUT_MAX, max(1, int(len(self.corpus) * HELDOUT_SHARE))) if len(self.corpus) > 1 else 0
        self.train_index = order[n_held:] if n_held else order
        self.held_batches = [self.batch(order[i:min(i + config.batch_size, n_held)], [config.seed, 1, i])
                             for i in range(0, n_held, config.batch_size)]

    def agreement(self) -> dict:
        """What every worker must share (not paths or threads): the settings, the corpus, the vocabulary and the
        step a resumed run starts at (a node without the folder's state would start over)."""
        local = {"output_dir", "threads", "overwrite", "device", "trust_pickle", "model", "corpus"}
        return {**{k: v for k, v in self.config.to_json().items() if k not in local},
                "corpus_texts_sha256": hashlib.sha256((self.cache / "text_hashes.npy").read_bytes()).hexdigest(),
                "corpus_tokens": self.corpus.stats["tokens"], "vocab_sha256": self.vocab_sha256,
                "resume_step": self.state["step"] if self.state else None}

    def _tokenize(self):
        """The corpus tokenized once per node into memory-mapped arrays (by the node's first worker), opened by
        every worker. The others wait in the group's rendezvous, which outlasts gloo's 30-s limit."""
        import os

        import paddle.distributed as dist

        node = node_of(self.rank)
        cache, started = self.out / (".corpus" if node == 0 else f".corpus-node{node}"), time.perf_counter()
        self.cache = cache
        if int(os.environ.get("PADDLE_LOCAL_RANK", "0") or 0) == 0:
            tokenize_corpus(self.config.corpus, self.fast, cache, text_budget(self.config.max_seq_len),
                            self.config.seed, progress=self._tokenizing_said(started),
                            words=self.config.masking == "word")
        elif self.world > 1:
            dist.init_parallel_env()
        corpus = TokenizedCorpus.open(cache)
        stats = corpus.stats
        self.say(f"corpus: {stats['texts']:,} texts, {stats['sequences']:,} sequences, {stats['tokens']:,} tokens "
                 f"({time.perf_counter() - started:.0f} s to tokenize); [UNK] rate {stats['unk_rate']:.2%}")
        if stats["unk_rate"] > UNK_RATE_LIMIT:
            raise SentiError(f"corpus {', '.join(self.config.corpus)}: {stats['unk_rate']:.0%} of its tokens are "
                             f"[UNK] under {self.config.model}'s vocabulary; pretrain from scratch:<shape> instead")
        return corpus

    def _tokenizing_said(self, started: float):
        """A progress callback for `tokenize_corpus`: a line every TOKENIZING_SAID_S seconds (a big corpus takes
        minutes, and a log showed nothing meanwhile)."""
        done, last = [0], [started]

        def progress(pieces: int) -> None:
            done[0] += pieces
            now = time.perf_counter()
            if now - last[0] >= TOKENIZING_SAID_S:
                last[0] = now
                self.say(f"tokenizing the corpus: {done[0]:,} texts (or pieces of long ones) so far, "
                         f"{now - started:.0f} s")

        return progress

    # --- what the loop asks ------------------------------------------------------------------------------------

    def examples(self) -> int:
        return len(self.train_index)

    def epoch_batches(self, epoch: int) -> list:
        """Length-bucketed batches of the training sequences (shuffled per epoch, tight in length), whole batches
        only, drawn from the epoch's own seed so that a resumed run deals the same ones."""
        from senti.toolkit.data.batching import length_bucketed_batches

        rng = np.random.default_rng([self.config.seed, 2, epoch - 1])
        local = length_bucketed_batches(self.corpus.lengths()[self.train_index], self.config.batch_size, rng)
        return [self.train_index[b] for b in local if len(b) == self.config.batch_size]

    def loss(self, index) -> Step:
        batch = self.batch(index, [self.config.seed, 0, self.step, self.rank])
        loss, _ = self.loss_and_hits(batch, self.net or self.model)
        return Step(loss, None, int(batch[0].size))

    def callbacks(self) -> list[Callback]:
        config = self.config
        prior = self.state["elapsed_minutes"] if self.state else 0.0
        return [TimeBudget(config.max_minutes, prior, config.fill_minutes), PretrainRecords(),
                SaveCadence(config.save_every),
                ProgressBar(lambda run, value: f"MLM loss {value:.3f} {run.rate:,.0f} tok/s")]

    def kept(self) -> str:
        if self.saved_step is None:
            return "no checkpoint was saved"
        return f"{self.out} holds step {self.saved_step} and resumes from it"

    def open_records(self) -> None:
        """The resumed step (its optimizer state and schedule restored), or 0; the metrics opened either way."""
        if self.state:  # a resume state written before metrics.json had a version is read as version 1
            self.step = self.saved_step = self.state["step"]
            self.metrics = PretrainMetrics.from_json({"meta_version": layout.META_VERSION, **self.state["metrics"]},
                                                     f"{self.out}'s resume state")
            self.metrics.resumed_at = self.step
            load_optimizer(self.optimizer, self.model, self.out)
            for _ in range(self.step):
                self.schedule.step()
        else:
            self.metrics = PretrainMetrics(written_by="senti pretrain", model=self.source,
                                           corpus=CorpusStats.from_json(self.corpus.stats),
                                           runtime=runtime_record(), world_size=self.world, nodes=nodes(),
                                           versions=versions(), precision=self.precision)

    def finish(self) -> None:
        self.metrics.write(self.out)
        plot_pretraining_curves(self.metrics, self.out / layout.CURVES_PNG)

    # --- masking, evaluation, saving ---------------------------------------------------------------------------

    def batch(self, index, seed):
        """Masked (input ids, flat positions, labels) for the sequences in `index`, drawn with `seed`."""
        corpus = self.corpus
        spans = [(corpus.offsets[i], corpus.offsets[i + 1]) for i in index]
        return mask_batch([np.asarray(corpus.ids[a:b]) for a, b in spans],
                          [np.asarray(corpus.word_start[a:b]) for a, b in spans], np.random.default_rng(seed),
                          self.masking)

    def loss_and_hits(self, batch, layer):
        """Masked-LM loss (the mean over masked positions) and how many of them the model got right."""
        import paddle
        import paddle.nn.functional as F

        ids, positions, labels = batch
        scores = layer(paddle.to_tensor(ids), masked_positions=paddle.to_tensor(positions))
        target = paddle.to_tensor(labels)
        return F.cross_entropy(scores, target), (scores.argmax(-1) == target).astype("float32").sum()

    def evaluate(self) -> HeldoutFigures | None:
        """MLM loss and masked-token accuracy on the held-out sequences, masked the same way every time."""
        import paddle

        if not self.held_batches:
            return None
        self.model.eval()
        total = hits = loss_sum = 0.0
        with paddle.no_grad():
            for batch in self.held_batches:
                loss, hit = self.loss_and_hits(batch, self.model)
                loss_sum += float(loss) * len(batch[2])
                hits += float(hit)
                total += len(batch[2])
        self.model.train()
        return HeldoutFigures(mlm_loss=loss_sum / total, masked_accuracy=hits / total, masked_tokens=int(total))

    def save(self, step: int, elapsed_minutes: float) -> None:
        """Weights, tokenizer, senti.json and the resume state, replaced atomically; then metrics and snapshots."""
        record = self.evaluate()
        if record:
            self.metrics.evaluations.append(replace(record, step=step))
        stats = self.corpus.stats
        meta = PretrainMeta(
            max_seq_len=self.config.max_seq_len, model=self.source, versions=self.metrics.versions, steps=step,
            tokenizer=TokenizerSettings.of(self.tokenizer),
            corpus=CorpusRecord.from_json({"sources": stats["corpora"], **{k: stats[k] for k in (
                "fingerprint", "tokens", "sequences", "unk_rate")}}),
            masking=MaskingRecord(self.config.masking, self.config.mask_rate, "80/10/10"),
            heldout=record, elapsed_minutes=round(elapsed_minutes, 2), parallel=Parallel(self.world, nodes()))
        state = {"step": step, "elapsed_minutes": elapsed_minutes, "metrics": self.metrics.to_json()}
        save_checkpoint(self.model, self.tokenizer, self.out, meta, self.config, extra={
            layout.PRETRAIN_STATE: lambda path: save_state(self.optimizer, self.model, path, state)})
        self.saved_step = step
        self.metrics.write(self.out)
        if not self.hashes_kept:  # the corpus does not change during a run: copy its text hashes once
            _keep_text_hashes(self.out / ".corpus", self.out)
            self.hashes_kept = True
        if self.config.snapshots:
            _snapshot(self.out, step)
        if record:
            self.say(f"step {step}: held-out MLM loss {record.mlm_loss:.3f}, masked-token accuracy "
                     f"{record.masked_accuracy:.3f}; saved")


def run_pretraining(config: PretrainConfig, say=print, progress=None) -> PretrainMetrics:
    """Pretrain per `config` into `config.output_dir`; returns the metrics (also in metrics.json)."""
    return PretrainRun(config, lambda: (PRETRAIN_LR, "pretraining's default"), say, progress).run()


class PretrainRecords(Callback):
    """A pretraining run's records: opened (or resumed) at the start, each step's loss and pace, a save (held-out
    figures, weights, resume state) when one is due."""

    def on_train_begin(self, run, control) -> None:
        run.open_records()

    def on_step_end(self, run, control, step, value) -> None:
        run.rate = run.tokens_this_run / run.clock.this_run_seconds()
        run.metrics.steps.append(PretrainStep(run.step, value, run.rate))

    def on_save(self, run, control) -> None:
        run.save(run.step, run.clock.minutes())


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
