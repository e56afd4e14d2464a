"""File names of every artifact senti writes: the one place readers and writers agree on.

`core` owns this module because it is the lowest floor: `toolkit` writes checkpoints and pretrained
folders, `export` writes export folders, and every stage reads them through these names.
"""

# A training checkpoint is a PaddleNLP `save_pretrained` folder plus these files.
CHECKPOINT_META = "senti.json"  # labels, max_seq_len, tokenizer settings, versions
TRAIN_CONFIG = "train_config.json"  # the exact TrainConfig used
METRICS = "metrics.json"  # per-epoch figures
CURVES_PNG = "training_curves.png"
DISTILL_CONFIG = "distill_config.json"  # the exact DistillConfig used (a student checkpoint)
DISTILL_META = "distill.json"  # teacher against student: sizes, dev and test figures
PRETRAIN_CONFIG = "pretrain_config.json"  # the exact PretrainConfig used (a pretrained folder)
PRETRAIN_STATE = "pretrain_state.safetensors"  # optimizer moments and the step, to resume a pretraining run
PRETRAIN_TEXT_HASHES = "pretrain_text_hashes.npy"  # 64-bit hashes of the texts pretrained on (uint64, no pickle)
TRAIN_TEXT_HASHES = "train_text_hashes.npy"  # 64-bit hashes of the texts trained on, ancestors' too (also in exports)
HELDOUT_TEXT_HASHES = "heldout_text_hashes.npy"  # 64-bit hashes of the dev and test texts, ancestors' too: never replayed
LEGACY_CONFIG = "model_config.json"  # older PaddleNLP folders' config
HF_TORCH_WEIGHTS = "pytorch_model.bin"  # a Hugging Face folder's PyTorch weights (core.torch_weights reads them)
HF_SPECIAL_TOKENS = "special_tokens_map.json"  # a Hugging Face folder's special tokens (senti convert reads them)
CONVERT_META = "convert.json"  # a folder made by senti convert from a Hugging Face one: its source and check
LAUNCH_LOGS = "launch_logs"  # each node's launcher and worker logs, inside the run's output folder
# What a run of senti leaves in its output folder before (or without) a checkpoint: a folder holding only these is
# senti's own, and a new run may write into it; anything else is the user's (toolkit.training.checkpoint.refuse_existing).
RUN_FILES = (TRAIN_CONFIG, METRICS, CURVES_PNG, DISTILL_CONFIG, DISTILL_META, PRETRAIN_CONFIG, PRETRAIN_STATE,
             PRETRAIN_TEXT_HASHES, TRAIN_TEXT_HASHES, HELDOUT_TEXT_HASHES, LAUNCH_LOGS)


def eval_results(split: str) -> str:
    """`senti eval`'s default output inside the checkpoint."""
    return f"eval_{split}.json"


def eval_domains(split: str) -> str:
    """`senti eval`'s default output inside the checkpoint when it scores several domains."""
    return f"eval_domains_{split}.json"


def eval_plot(output: str, kind: str) -> str:
    """`senti eval`'s plots beside its JSON output `output` (a file name): `kind` calibration (the reliability
    diagram) or risk_coverage: eval_test.json -> eval_test.calibration.png."""
    return f"{output.removesuffix('.json')}.{kind}.png"


# A `senti audit` output folder: the suspects (one JSON line each, largest margin first) and the noise figures.
AUDIT_SUSPECTS = "suspects.jsonl"
AUDIT_REPORT = "audit.json"


PADDLENLP_CONFIG = "config.json"  # written by PaddleNLP 2.8 save_pretrained
PADDLENLP_SAFE_WEIGHTS = "model.safetensors"  # what senti writes: loading it cannot run code
PADDLENLP_WEIGHTS = "model_state.pdparams"  # a pickle: loaded only when the user passes --trust-pickle
VOCAB = "vocab.txt"

# Metadata schema version (senti.json, export.json, results.json): bump when a reader must change.
META_VERSION = 1
SUPPORTED_META_VERSIONS = (1,)

# An export folder (written by `senti export`, read by `serving.Predictor`).
EXPORT_META = "export.json"  # labels, max_seq_len, tokenizer settings, versions, io names, parity
PADDLE_DIR = "paddle"  # Paddle Inference model: inference.json (Paddle 3, PIR) or inference.pdmodel (2.x)
PADDLE_PREFIX = "inference"
PADDLE_PARAMS = "inference.pdiparams"
PADDLE_GRAPHS = ("inference.json", "inference.pdmodel")  # PIR first: Paddle 3 reads both
ONNX_FILES = {
    "onnx": "model.onnx",  # paddle2onnx output, fp32
    "onnx-opt": "model.opt.onnx",  # ONNX Runtime transformer optimizer fusions, fp32
    "onnx-int8": "model.int8.onnx",  # dynamic INT8 quantization, for CPU (scales per call: batch-dependent)
    "onnx-int8-static": "model.int8-static.onnx",  # static INT8, scales calibrated on training texts
    "onnx-fp16": "model.fp16.onnx",  # float16 weights and compute, for GPU providers
}
TOKENIZER_JSON = "tokenizer.json"  # Hugging Face `tokenizers`: the ids senti's runtime makes, no Python needed
PADDLENLP_TOKENIZER_CONFIG = "tokenizer_config.json"  # AutoTokenizer.from_pretrained: do_lower_case and more
TRITON_DIR = "triton"
TRITON_CONFIG = "config.pbtxt"
TRITON_LABELS = "labels.txt"
TRITON_MODEL = "model.onnx"  # Triton Inference Server model repository: triton/<name>/1/model.onnx
INPUT_NAMES = ("input_ids", "token_type_ids")
OUTPUT_NAME = "logits"


# A `senti bench` output folder.
BENCH_RESULTS = "results.json"
BENCH_REPORT = "report.md"
BENCH_PLOTS = ("throughput.png", "latency.png")


def work_prefix(name: str, kind: str) -> str:
    """Hidden name of a file or folder still being written for `name` by this process: `.NAME.KIND-PID-`.
    The PID lets a later run tell the leftovers of a killed run (removed) from a live one's (kept)."""
    import os

    return f".{name}.{kind}-{os.getpid()}-"


def paddle_model_files(folder) -> tuple[str, str]:
    """(graph file, params file) of a Paddle Inference model folder, whichever format it has."""
    from pathlib import Path

    folder = Path(folder)
    for name in PADDLE_GRAPHS:
        if (folder / name).is_file():
            return str(folder / name), str(folder / PADDLE_PARAMS)
    raise FileNotFoundError(f"{folder}: no {' or '.join(PADDLE_GRAPHS)}")
