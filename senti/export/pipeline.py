"""`senti export`: checkpoint -> static graph -> Paddle Inference and ONNX variants, each checked for parity.

All work happens in a hidden staging folder beside the output; the output folder appears (or
replaces an old one, with --overwrite) only once every fp32 format has matched the dynamic graph.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from senti.core import layout, stopping
from senti.core.artifacts import (
    Abstention,
    Calibration,
    DriftFigures,
    ExportMeta,
    FormatRecord,
    GraphIO,
    MadeFacts,
    ModelShape,
    Parity,
    ParitySample,
    SplitRecipe,
    TokenizerSettings,
    remove_stale_work,
)
from senti.core.aspects import head_aspects
from senti.core.batching import model_pad_id, pad_batch
from senti.core.calibration import Target, calibrated_probabilities, choose_threshold
from senti.core.checkpoint import load_checkpoint
from senti.core.errors import SentiError
from senti.core.runtime import package_versions
from senti.core.sequence import length_to_use, seq_len_problem, text_budget
from senti.export.onnx_convert import (
    ExportError,
    optimize,
    paddle_to_onnx,
    quantize_int8,
    quantize_int8_static,
    to_fp16,
)
from senti.export.parity import compare, gold_accuracy, logits_by_shape
from senti.export.specs import ERNIE_SEQUENCE_CLASSIFICATION, ExportSpec
from senti.export.static import save_static
from senti.export.triton import write_repository
from senti.serving.backends import FORMATS, open_backend
from senti.serving.drift import summarize
from senti.serving.parity import judge
from senti.serving.tokenizer import FastTokenizer

# What --formats chooses: the formats made from the checkpoint itself; the others follow from --quantize and --fp16.
EXPORT_FORMATS = tuple(name for name, fmt in FORMATS.items() if fmt.source is None)
QUANTIZE_CHOICES = tuple(sorted({fmt.option for fmt in FORMATS.values() if fmt.precision == "int8" and fmt.option}))


@dataclass
class ExportConfig:
    model: str
    output_dir: str
    formats: tuple[str, ...] = EXPORT_FORMATS
    quantize: str | None = None  # "int8"
    fp16: bool = False
    opset: int = 14
    max_seq_len: int | None = None  # default: the checkpoint's
    overwrite: bool = False
    triton_name: str = "senti"
    threads: int | None = None
    trust_pickle: bool = False  # load a checkpoint whose weights are a pickle (.pdparams can run code)
    calibrate: bool = True  # carry the checkpoint's calibration (senti.json) to export.json; False: the plain softmax
    abstain: str | None = None  # "precision=0.97" or "coverage=0.9": an unsure threshold chosen on the dev texts

    def __post_init__(self):
        self.formats = tuple(self.formats)
        if self.abstain is not None:
            Target.parse(self.abstain)  # a bad target is refused before anything loads
        unknown = set(self.formats) - set(EXPORT_FORMATS)
        if unknown or not self.formats:
            raise ExportError(f"formats must be a non-empty subset of {', '.join(EXPORT_FORMATS)}; got {self.formats}")
        if self.quantize not in (None, *QUANTIZE_CHOICES):
            raise ExportError(f"quantize must be 'int8'; got '{self.quantize}'")
        if (self.quantize or self.fp16) and "onnx" not in self.formats:
            raise ExportError("--quantize and --fp16 produce ONNX models: add onnx to --formats")
        if not 11 <= self.opset <= 21:
            raise ExportError(f"opset must be between 11 and 21; got {self.opset}")
        if self.max_seq_len is not None and seq_len_problem(self.max_seq_len):
            raise ExportError(seq_len_problem(self.max_seq_len))
        if self.threads is not None and self.threads < 1:
            raise ExportError(f"threads must be at least 1; got {self.threads}")


def _check_output(out: Path, overwrite: bool) -> None:
    if out.exists() and not overwrite:
        raise ExportError(f"{out} already exists; pass --overwrite to replace it")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ExportError(f"cannot create {out.parent} ({err.strerror})") from None
    if not os.access(out.parent, os.W_OK):
        raise ExportError(f"cannot write into {out.parent}")


def _versions() -> dict:
    return package_versions()


@dataclass
class Job:
    """What a format's maker reads: the staging folder, the static graph, the model and the calibration ids."""

    staging: Path
    graph_file: str
    params_file: str
    spec: ExportSpec
    model: Any
    calibration: list  # token ids of the calibration texts (static INT8)
    calibration_source: dict
    pad_id: int  # the model's padding id (core.batching.model_pad_id)

    def path(self, fmt: str) -> Path:
        return self.staging / FORMATS[fmt].path

    def source(self, fmt: str) -> Path:
        """The file a derived format is made from (its FORMATS row names the source format)."""
        source = FORMATS[fmt].source
        assert source is not None, f"{fmt} is made from another format"
        return self.path(source)


@dataclass
class Made:
    """A format written: its files (relative to the export folder), facts for export.json, the ONNX io record."""

    files: list[str]
    facts: dict = field(default_factory=dict)
    io: dict | None = None


# How each format in senti.serving.backends.FORMATS is made (its file, precision, tolerance and rank are there):
# the maker registered under its name, `(job, name) -> Made`. A test holds the two registries to the same names.
MAKERS: dict[str, Callable[[Job, str], Made]] = {}


def maker(name: str):
    def register(make: Callable[[Job, str], Made]) -> Callable[[Job, str], Made]:
        MAKERS[name] = make
        return make

    return register


@maker("paddle")
def _paddle_inference(job: Job, fmt: str) -> Made:  # written by save_static before any other format
    return Made([f"{layout.PADDLE_DIR}/{Path(job.graph_file).name}", f"{layout.PADDLE_DIR}/{layout.PADDLE_PARAMS}"])


@maker("onnx")
def _onnx(job: Job, fmt: str) -> Made:
    return Made([job.path(fmt).name], io=paddle_to_onnx(job.graph_file, job.params_file, job.path(fmt), job.spec))


@maker("onnx-opt")
def _optimize(job: Job, fmt: str) -> Made:
    config = job.model.config
    return Made([job.path(fmt).name], {"fusions": optimize(job.source(fmt), job.path(fmt), config.num_attention_heads,
                                                           config.hidden_size)})


@maker("onnx-int8-static")
def _calibrated_int8(job: Job, fmt: str) -> Made:
    batches = [pad_batch(job.calibration, list(range(i, min(i + 32, len(job.calibration)))), job.pad_id)
               for i in range(0, len(job.calibration), 32)]
    facts = quantize_int8_static(job.source(fmt), job.path(fmt), batches)
    return Made([job.path(fmt).name], {**facts, "calibration": job.calibration_source})


@maker("onnx-int8")
def _dynamic_int8(job: Job, fmt: str) -> Made:
    quantize_int8(job.source(fmt), job.path(fmt))
    return Made([job.path(fmt).name])


@maker("onnx-fp16")
def _fp16(job: Job, fmt: str) -> Made:
    to_fp16(job.source(fmt), job.path(fmt))
    return Made([job.path(fmt).name])


CALIBRATION_TEXTS = 512  # training texts for the static INT8 scales: more changed nothing measurable here


def wanted_formats(config: ExportConfig) -> list[str]:
    """The formats this export writes, in FORMATS order: those asked for, and each derived format whose source is
    written and whose option is on (with int8, both the calibrated one `auto` serves and the dynamic one)."""
    options = {None, config.quantize, "fp16" if config.fp16 else None}
    wanted = set(config.formats)
    for name, fmt in FORMATS.items():  # a source precedes what is made from it in FORMATS
        if fmt.source in wanted and fmt.option in options:
            wanted.add(name)
    return [name for name in FORMATS if name in wanted]


@dataclass
class Reference:
    """The dynamic graph's answers on the parity texts, which every format is judged against."""

    texts: list[str]
    encoded: list[list[int]]
    pad_id: int
    gold_ids: np.ndarray
    logits: dict  # by batch shape (logits_by_shape)
    accuracy: float
    stats: dict  # the drift figures senti predict compares with
    labels: list[str]
    max_len: int


@dataclass
class Written:
    """What the staging folder holds beside the reference: each format's record, the graph's inputs and outputs,
    the Triton folder, the tokenizer's settings."""

    formats: dict
    io: dict | None
    triton: Path | None
    tokenizer: TokenizerSettings


def gold_ids(gold: Sequence[str | list[str]], labels: list[str]) -> np.ndarray:
    """[texts, groups] ids within each group of the model's outputs (export.parity.answers): a sentence model's
    label per text, or for aspect heads the "aspect/polarity" labels each text has (-1 for an aspect it has none of)."""
    names = head_aspects(labels)
    if names is None:
        return np.array([[labels.index(str(g))] for g in gold], dtype=np.int64).reshape(len(gold), 1)
    ids = np.full((len(gold), len(names)), -1, dtype=np.int64)
    per = len(labels) // len(names)
    for i, said in enumerate(gold):
        for label in said:
            ids[i, labels.index(label) // per] = labels.index(label) % per
    return ids


@dataclass
class Scores:
    """How the export's logits become the probabilities answered, and its abstention threshold."""

    calibration: Calibration | None
    abstain: Abstention | None = None


def _scores(config: ExportConfig, calibration: Calibration | None, labels: list[str]) -> Scores:
    """The checkpoint's calibration as the export carries it (none with `calibrate` off)."""
    if config.abstain is not None and head_aspects(labels) is not None:
        raise ExportError("--abstain is for a sentence model; a model with aspect heads answers per aspect")
    return Scores(calibration if config.calibrate else None)


def _choose_abstention(config: ExportConfig, scores: Scores, reference: Reference, say) -> Scores:
    """`config.abstain`'s threshold chosen on the parity (dev) texts' calibrated probabilities."""
    if config.abstain is None:
        return scores
    target = Target.parse(config.abstain)
    probs = calibrated_probabilities(reference.logits["batch_32"], scores.calibration)
    try:
        chosen = choose_threshold(probs, reference.gold_ids[:, 0], target)
    except SentiError as err:
        raise ExportError(f"--abstain {target}: {err}") from None
    plain = "" if scores.calibration else " (plain softmax: the checkpoint records no calibration)"
    say(f"abstention for {target}: answers below {chosen.threshold:.4f} are unsure{plain}; on {chosen.texts} dev texts "
        f"it answers {chosen.dev_coverage:.1%} at precision {chosen.dev_precision:.4f}")
    return replace(scores, abstain=chosen)


def _reference(model, tokenizer, fast: FastTokenizer, texts_gold: tuple[list[str], Sequence[str | list[str]]],
               max_len: int, labels: list[str], calibration: Calibration | None) -> Reference:
    import paddle

    texts, gold = texts_gold
    encoded = tokenizer(texts, max_length=max_len, truncation=True)["input_ids"]
    ids = gold_ids(gold, labels)

    def dynamic(input_ids, token_type_ids):
        with paddle.no_grad():
            return model(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids)).numpy()

    pad_id = model_pad_id(model)
    logits = logits_by_shape(dynamic, encoded, pad_id)  # before to_static, which rewrites the layer in place
    return Reference(texts, encoded, pad_id, ids, logits, gold_accuracy(logits["batch_32"], ids),
                     _drift_of(calibrated_probabilities(logits["batch_32"], calibration), texts, fast, max_len, labels),
                     labels, max_len)


def export_model(config: ExportConfig, texts: list[str], gold: Sequence[str | list[str]], say=print,
                 spec: ExportSpec = ERNIE_SEQUENCE_CLASSIFICATION, data: SplitRecipe | None = None,
                 calibration_texts: list[str] | None = None) -> ExportMeta:
    """Export per `config`, proving parity on `texts` (with `gold` labels: one per text, or for aspect heads the
    list of "aspect/polarity" labels each text has); returns the export.json record written.

    `data` is the split recipe the parity texts were cut with, recorded in export.json;
    `calibration_texts` (training texts) set the static INT8 scales (default: the parity texts).
    """
    spec = replace(spec, opset=config.opset)
    out = Path(config.output_dir).expanduser().resolve()
    _check_output(out, config.overwrite)
    model, tokenizer, meta = load_checkpoint(Path(config.model), config.trust_pickle)
    max_len = length_to_use(config.max_seq_len, meta.max_seq_len)
    _check_parity_inputs(model, meta.labels, max_len, texts, gold)
    started = time.perf_counter()
    settings = TokenizerSettings.of(tokenizer)
    fast = FastTokenizer.from_settings(Path(config.model), settings)
    scores = _scores(config, meta.calibration, meta.labels)
    reference = _reference(model, tokenizer, fast, (texts, gold), max_len, meta.labels, scores.calibration)
    say(f"dynamic graph: accuracy {reference.accuracy:.4f} on {len(texts)} parity texts")
    scores = _choose_abstention(config, scores, reference, say)

    for stale in remove_stale_work(out.parent, out.name, "staging"):
        say(f"removed {stale}: the staging folder of an export that was killed")
    calibration = (calibration_texts or texts)[:CALIBRATION_TEXTS]
    calibration_ids = tokenizer(calibration, max_length=max_len, truncation=True)["input_ids"]
    calibration_source = {"texts": len(calibration), "from": "training split" if calibration_texts else "parity texts"}
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=layout.work_prefix(out.name, "staging")))
    try:
        graph_file, params_file = save_static(model, staging / layout.PADDLE_DIR, spec)
        job = Job(staging, graph_file, params_file, spec, model, calibration_ids, calibration_source, reference.pad_id)
        formats, io = _write_formats(config, job, reference, say)
        triton = _write_beside(config, staging, (tokenizer, settings, fast), meta.labels, max_len)
        written = Written(formats, io, triton, settings)
        record = _export_record(config, data, job, reference, written, time.perf_counter() - started)
        record.calibration, record.abstain = scores.calibration, scores.abstain
        record.write(staging)
        stopping.checkpoint()
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return record


def _write_formats(config: ExportConfig, job: Job, reference: Reference, say) -> tuple[dict, dict | None]:
    """Each wanted format made in the staging folder and judged against the reference: (records, io); ExportError
    when a required format disagrees."""
    formats, io = {}, None
    for fmt in wanted_formats(config):
        stopping.checkpoint()  # a SIGTERM between steps: the staging folder goes with the exception
        made = MAKERS[fmt](job, fmt)
        io = made.io or io
        parity = _check_format(fmt, job.staging, config.threads, (reference.encoded, reference.pad_id),
                               reference.logits, reference.gold_ids, reference.accuracy, say)
        formats[fmt] = FormatRecord(files=made.files, parity=parity, made=MadeFacts.from_json(made.facts))
    failed = {f: v.parity.reason for f, v in formats.items() if FORMATS[f].required and not v.parity.fit}
    if failed:
        raise ExportError("exported model disagrees with the dynamic graph: " +
                          "; ".join(f"{f}: {r}" for f, r in failed.items()))
    return formats, io


def _write_beside(config: ExportConfig, staging: Path, tokenizers: tuple, labels: list[str],
                  max_len: int) -> Path | None:
    """What travels with the model: the Triton repository (with ONNX), the tokenizer's files, the training texts'
    hashes; returns the Triton folder or None. `tokenizers`: the checkpoint's tokenizer, its settings as read
    before anything was written, and the fast tokenizer made from them."""
    tokenizer, settings, fast = tokenizers
    if "paddle" not in config.formats:
        shutil.rmtree(staging / layout.PADDLE_DIR)
    triton = None
    if "onnx" in config.formats:
        triton = write_repository(staging / layout.TRITON_DIR, config.triton_name,
                                  staging / layout.ONNX_FILES["onnx"], labels)
    # PaddleNLP's deployment convention: the tokenizer travels with the model (AutoTokenizer.from_pretrained(
    # export) works), plus the same ids as one tokenizer.json for clients without Python.
    tokenizer.save_pretrained(str(staging))
    if settings.vocab_file == layout.VOCAB:  # a model's own tokenizer.json is the one below
        shutil.copyfile(Path(config.model) / layout.VOCAB, staging / layout.VOCAB)  # byte for byte the checkpoint's
    if (Path(config.model) / layout.TRAIN_TEXT_HASHES).is_file():  # so `senti eval` of the export says it too
        shutil.copyfile(Path(config.model) / layout.TRAIN_TEXT_HASHES, staging / layout.TRAIN_TEXT_HASHES)
    fast.save_standalone(staging / layout.TOKENIZER_JSON, max_len)
    return triton


def _check_format(fmt: str, staging: Path, threads, texts: tuple[list, int], reference: dict, gold: np.ndarray,
                  reference_accuracy: float, say) -> Parity:
    """The parity record of one format just written to `staging`, judged against the dynamic graph on `texts`
    (their ids, and the padding id)."""
    stopping.checkpoint()
    try:
        candidate = logits_by_shape(open_backend(staging, fmt, threads=threads), *texts)
    except SentiError:
        raise
    except Exception as err:  # the runtimes raise their own types on graphs they cannot run
        if FORMATS[fmt].cpu_rank is None:  # a GPU format: the CPU provider may lack its kernels
            return Parity(fit=None, reason=f"not verifiable here ({type(err).__name__}: {str(err)[:120]})")
        raise ExportError(f"{fmt}: the exported model does not run ({type(err).__name__}: "
                          f"{str(err).splitlines()[0][:200]})") from None
    result = Parity.from_json(judge(fmt, compare(reference, candidate, gold), reference_accuracy))
    say(f"{fmt}: {result.reason}; accuracy {result.accuracy:.4f}")
    return result


def _check_parity_inputs(model, labels: list[str], max_len: int, texts: list[str],
                         gold: Sequence[str | list[str]]) -> None:
    if max_len > model.config.max_position_embeddings:
        raise ExportError(f"max_seq_len {max_len} exceeds the model's {model.config.max_position_embeddings} positions")
    given = {g for said in gold for g in ([said] if isinstance(said, str) else said)}
    unknown = sorted(given - set(labels))
    if unknown:
        raise ExportError(f"parity texts have labels {unknown} that the model does not know ({labels})")
    if len(texts) < 2:
        raise ExportError("parity needs real texts: got fewer than 2")


def _export_record(config: ExportConfig, data, job: Job, reference: Reference, written: Written,
                   seconds: float) -> ExportMeta:
    """export.json's schema, filled."""
    model, spec, labels = job.model, job.spec, reference.labels
    return ExportMeta(
        source_checkpoint=str(Path(config.model).resolve()),
        data=data,
        labels=labels,
        max_seq_len=reference.max_len,
        tokenizer=written.tokenizer,
        model=ModelShape(hidden_size=model.config.hidden_size, num_hidden_layers=model.config.num_hidden_layers,
                         num_attention_heads=model.config.num_attention_heads,
                         intermediate_size=model.config.intermediate_size, vocab_size=model.config.vocab_size),
        io=GraphIO.from_json(written.io or {"inputs": {n: ["batch", "sequence"] for n in spec.input_names},
                                            "outputs": {spec.output_name: ["batch", len(labels)]}}),
        spec=spec,
        parity_texts=len(reference.texts),
        reference_accuracy=reference.accuracy,
        formats=written.formats,
        triton=str(written.triton.relative_to(job.staging)) if written.triton else None,
        versions=_versions(),
        seconds=seconds,
        # the label names beside the answers: a later swap of names in export.json is caught on opening
        parity_sample=ParitySample(texts=reference.texts[: len(reference.logits["batch_1"])],
                                   logits=reference.logits["batch_1"].tolist(), labels=labels),
        reference_stats=DriftFigures.from_json(reference.stats),
    )


def _drift_of(probs: np.ndarray, texts: list[str], fast: FastTokenizer, max_len: int, labels: list[str]) -> dict:
    """The drift figures of the parity (dev) texts under the dynamic graph (`probs`: its probabilities, as the export
    answers them), for `senti predict` to compare with."""
    ids = fast.encode_batch(texts)
    return summarize([SimpleNamespace(score=float(p.max()), label=labels[int(p.argmax())], truncated=len(x) > text_budget(max_len),
                                      tokens=len(x), unknown_tokens=sum(t == fast.unk_id for t in x))
                      for p, x in zip(probs, ids)])


def _publish(staging: Path, out: Path) -> None:
    """Swap the finished staging folder into place; an old export is removed only after the rename."""
    old = None
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.replace(out, old)
    os.replace(staging, out)
    os.chmod(out, 0o755)
    if old:
        shutil.rmtree(old, ignore_errors=True)
