"""`senti export`: checkpoint -> static graph -> Paddle Inference and ONNX variants, each checked for parity.

All work happens in a hidden staging folder beside the output; the output folder appears (or
replaces an old one, with --overwrite) only once every fp32 format has matched the dynamic graph.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from export.checkpoint import load_checkpoint
from export.onnx_convert import ExportError, optimize, paddle_to_onnx, quantize_int8, to_fp16
from export.parity import compare, judge, logits_by_shape
from export.specs import ERNIE_SEQUENCE_CLASSIFICATION, ExportSpec
from export.static import save_static
from export.triton import write_repository
from serving import layout
from serving.backends import open_backend
from serving.errors import SentiError
from serving.runtime import package_versions

FORMATS = ("paddle", "onnx")
FP32_FORMATS = ("paddle", "onnx", "onnx-opt")


@dataclass
class ExportConfig:
    model: str
    output_dir: str
    formats: tuple[str, ...] = FORMATS
    quantize: str | None = None  # "int8"
    fp16: bool = False
    opset: int = 14
    max_seq_len: int | None = None  # default: the checkpoint's
    overwrite: bool = False
    triton_name: str = "senti"
    threads: int | None = None

    def __post_init__(self):
        self.formats = tuple(self.formats)
        unknown = set(self.formats) - set(FORMATS)
        if unknown or not self.formats:
            raise ExportError(f"formats must be a non-empty subset of {', '.join(FORMATS)}; got {self.formats}")
        if self.quantize not in (None, "int8"):
            raise ExportError(f"quantize must be 'int8'; got '{self.quantize}'")
        if (self.quantize or self.fp16) and "onnx" not in self.formats:
            raise ExportError("--quantize and --fp16 produce ONNX models: add onnx to --formats")
        if not 11 <= self.opset <= 21:
            raise ExportError(f"opset must be between 11 and 21; got {self.opset}")


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
    return package_versions(("paddlepaddle", "paddlepaddle-gpu", "paddlenlp", "paddle2onnx", "onnx", "onnxruntime",
                             "onnxruntime-gpu"))


def export_model(config: ExportConfig, texts: list[str], gold: list[str], say=print,
                 spec: ExportSpec = ERNIE_SEQUENCE_CLASSIFICATION) -> dict:
    """Export per `config`, proving parity on `texts` (with `gold` labels); returns export.json's content."""
    import paddle

    spec = replace(spec, opset=config.opset)
    out = Path(config.output_dir).expanduser().resolve()
    _check_output(out, config.overwrite)
    model, tokenizer, meta = load_checkpoint(Path(config.model))
    labels = meta["labels"]
    max_len = config.max_seq_len or meta["max_seq_len"]
    if max_len > model.config.max_position_embeddings:
        raise ExportError(f"max_seq_len {max_len} exceeds the model's {model.config.max_position_embeddings} positions")
    unknown = sorted(set(gold) - set(labels))
    if unknown:
        raise ExportError(f"parity texts have labels {unknown} that the model does not know ({labels})")
    if len(texts) < 2:
        raise ExportError("parity needs real texts: got fewer than 2")
    encoded = tokenizer(texts, max_length=max_len, truncation=True)["input_ids"]
    gold_ids = np.array([labels.index(g) for g in gold])

    def dynamic(input_ids, token_type_ids):
        with paddle.no_grad():
            return model(paddle.to_tensor(input_ids), token_type_ids=paddle.to_tensor(token_type_ids)).numpy()

    started = time.perf_counter()
    reference = logits_by_shape(dynamic, encoded)  # before to_static, which rewrites the layer in place
    reference_accuracy = float((reference["batch_32"].argmax(1) == gold_ids).mean())
    say(f"dynamic graph: accuracy {reference_accuracy:.4f} on {len(texts)} parity texts")

    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.staging-"))
    try:
        formats, io = {}, None
        graph_file, params_file = save_static(model, staging / layout.PADDLE_DIR, spec)

        def check(fmt: str, **options) -> dict:
            try:
                candidate = logits_by_shape(open_backend(staging, fmt, threads=config.threads, **options), encoded)
            except SentiError:
                raise
            except Exception as err:  # the runtimes raise their own types on graphs they cannot run
                raise ExportError(f"{fmt}: the exported model does not run ({type(err).__name__}: "
                                  f"{str(err).splitlines()[0][:200]})") from None
            result = judge(fmt, compare(reference, candidate, gold_ids), reference_accuracy, spec)
            say(f"{fmt}: {result['reason']}; accuracy {result['accuracy']:.4f}")
            return result

        if "paddle" in config.formats:
            formats["paddle"] = {"files": [f"{layout.PADDLE_DIR}/{Path(graph_file).name}",
                                           f"{layout.PADDLE_DIR}/{layout.PADDLE_PARAMS}"],
                                 "parity": check("paddle")}
        if "onnx" in config.formats:
            onnx_path = staging / layout.ONNX_FILES["onnx"]
            io = paddle_to_onnx(graph_file, params_file, onnx_path, spec)
            formats["onnx"] = {"files": [onnx_path.name], "parity": check("onnx")}
            opt_path = staging / layout.ONNX_FILES["onnx-opt"]
            fusions = optimize(onnx_path, opt_path, model.config.num_attention_heads, model.config.hidden_size)
            formats["onnx-opt"] = {"files": [opt_path.name], "fusions": fusions, "parity": check("onnx-opt")}
            if config.quantize == "int8":
                int8_path = staging / layout.ONNX_FILES["onnx-int8"]
                quantize_int8(opt_path, int8_path)
                formats["onnx-int8"] = {"files": [int8_path.name], "parity": check("onnx-int8")}
            if config.fp16:
                fp16_path = staging / layout.ONNX_FILES["onnx-fp16"]
                to_fp16(opt_path, fp16_path)
                formats["onnx-fp16"] = {"files": [fp16_path.name], "parity": _check_fp16(check)}
        failed = {f: v["parity"]["reason"] for f, v in formats.items()
                  if f in FP32_FORMATS and not v["parity"]["fit"]}
        if failed:
            raise ExportError("exported model disagrees with the dynamic graph: " +
                              "; ".join(f"{f}: {r}" for f, r in failed.items()))
        if "paddle" not in config.formats:
            shutil.rmtree(staging / layout.PADDLE_DIR)
        triton = None
        if "onnx" in config.formats:
            triton = write_repository(staging / layout.TRITON_DIR, config.triton_name,
                                      staging / layout.ONNX_FILES["onnx"], labels)
        shutil.copyfile(Path(config.model) / layout.VOCAB, staging / layout.VOCAB)
        record = {
            "meta_version": layout.META_VERSION,
            "written_by": "senti export",
            "source_checkpoint": str(Path(config.model).resolve()),
            "labels": labels,
            "max_seq_len": max_len,
            "tokenizer": {
                "class": type(tokenizer).__name__, "vocab_file": layout.VOCAB,
                "do_lower_case": bool(getattr(tokenizer, "do_lower_case", True)),
                "unk_token": tokenizer.unk_token, "cls_token": tokenizer.cls_token,
                "sep_token": tokenizer.sep_token, "pad_token": tokenizer.pad_token,
                "pad_token_id": tokenizer.pad_token_id,
            },
            "model": {"hidden_size": model.config.hidden_size, "num_hidden_layers": model.config.num_hidden_layers,
                      "num_attention_heads": model.config.num_attention_heads,
                      "intermediate_size": model.config.intermediate_size, "vocab_size": model.config.vocab_size},
            "io": io or {"inputs": {n: ["batch", "sequence"] for n in spec.input_names},
                         "outputs": {spec.output_name: ["batch", len(labels)]}},
            "spec": asdict(spec),
            "parity_texts": len(texts),
            "reference_accuracy": reference_accuracy,
            "formats": formats,
            "triton": str(triton.relative_to(staging)) if triton else None,
            "versions": _versions(),
            "seconds": time.perf_counter() - started,
        }
        text = json.dumps(record, ensure_ascii=False, indent=2) + "\n"
        (staging / layout.EXPORT_META).write_text(text, encoding="utf-8")
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return json.loads(text)  # exactly what export.json holds


def _check_fp16(check) -> dict:
    """fp16 graphs need kernels the CPU provider may lack; say so instead of failing the export."""
    try:
        return check("onnx-fp16")
    except Exception as err:  # onnxruntime raises its own types for missing kernels
        return {"fit": None, "reason": f"not verifiable here ({type(err).__name__}: {str(err)[:120]})"}


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
