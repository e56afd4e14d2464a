"""Model specs: from-scratch presets (random weights, character vocabulary), PaddleNLP names, checkpoints."""

from __future__ import annotations

import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from senti.core import layout
from senti.core.checkpoint import CheckpointMeta, ModelSource, load_checkpoint, model_files_inside, read_meta
from senti.core.errors import ArtifactError, SentiError
from senti.core.sequence import text_windows
from senti.toolkit.training.hf_convert import is_hf_folder

# ERNIE shapes by name: layers, hidden size, attention heads, feed-forward size.
SHAPES: dict[str, tuple[int, int, int, int]] = {
    "2l-128h": (2, 128, 2, 512),
    "3l-128h": (3, 128, 2, 512),
    "4l-256h": (4, 256, 4, 1024),
    "4l-312h": (4, 312, 12, 1248),  # ernie-3.0-nano-zh
    "4l-512h": (4, 512, 8, 2048),  # m3e-small, UER's chinese_roberta_L-4_H-512
    "6l-384h": (6, 384, 12, 1536),  # ernie-3.0-micro-zh
    "12l-384h": (12, 384, 12, 1536),  # multilingual-e5-small
    "6l-768h": (6, 768, 12, 3072),  # ernie-3.0-medium-zh
    "12l-768h": (12, 768, 12, 3072),  # ernie-3.0-base-zh, ernie-1.0
}
# From-scratch presets: random weights, a character vocabulary from the training split.
# `scratch:tiny` trains an epoch of ChnSentiCorp in about a minute on 2 CPU cores;
# `scratch:small` is the distillation teacher. Any shape above also works as `scratch:<shape>`.
PRESETS: dict[str, str] = {"scratch:tiny": "2l-128h", "scratch:small": "4l-312h",
                           **{f"scratch:{name}": name for name in SHAPES}}
# Default peak learning rates by where the weights come from (their origin, followed through continued
# checkpoints). Random weights learn nothing at PaddleNLP's 5e-5 in an epoch (0.506 dev accuracy, chance): scratch:tiny,
# one epoch of ChnSentiCorp, measured 1e-4: 0.507, 3e-4: 0.828, 5e-4: 0.851 dev accuracy (docs/results/chnsenticorp.md).
# A checkpoint trained from scratch continues at that rate too: at 5e-5 the surge loop moved its domain by +0.1 point.
# Large hub models (ERNIE base) keep PaddleNLP's rate; senti's own small pretrained models want PRETRAINED_LR:
# 3l-128h pretrained 65 min by `senti pretrain`, 3 epochs of ChnSentiCorp, dev accuracy at 2e-4: 0.8825, 5e-4: 0.8967
# (docs/guides/pretraining.md, measured).
FINE_TUNE_LR = 5e-5
SCRATCH_LR = 5e-4
PRETRAINED_LR = 5e-4
# A Hugging Face encoder (converted): e5-small and m3e-small passed the baseline on dev in their first epoch at 1e-4
# and improved to the third (docs/results/pretrained-start.md); not swept.
HF_LR = 1e-4
ORIGIN_LR = {"scratch": SCRATCH_LR, "pretrained": PRETRAINED_LR, "paddlenlp": FINE_TUNE_LR, "huggingface": HF_LR}
ORIGIN_WHY = {"scratch": "weights trained from scratch", "pretrained": "a small model pretrained by senti pretrain "
              "or a local PaddleNLP folder", "paddlenlp": "a PaddleNLP hub model",
              "huggingface": "a pretrained Hugging Face encoder"}


def weights_origin(spec: str) -> str:
    """Where a model spec's weights began: scratch, pretrained (a local folder) or paddlenlp (a hub name); a
    checkpoint answers with its own recorded origin, so continuing keeps the rate that trained it."""
    if spec in PRESETS or spec.startswith("scratch:"):
        return "scratch"
    path = Path(spec).expanduser()
    if not path.is_dir():
        return "paddlenlp"
    if is_hf_folder(path) or (path / layout.CONVERT_META).is_file():
        return "huggingface"
    if not is_checkpoint(path):
        return "pretrained"
    try:
        model = CheckpointMeta.read(path).model
    except ArtifactError:
        return "paddlenlp"
    origin = model.origin or model.source
    return {"preset": "scratch"}.get(origin, origin) if origin in (*ORIGIN_LR, "preset") else "paddlenlp"


def default_lr(spec: str, from_scratch: bool | None = None) -> tuple[float, str]:
    """(learning rate, why) for a model spec, by where its weights began (`weights_origin`)."""
    origin = "scratch" if from_scratch else weights_origin(spec)
    return ORIGIN_LR[origin], f"the default for {ORIGIN_WHY[origin]} (best measured here)"


SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # [PAD] first: ERNIE's pad_token_id is 0


def build_char_vocab(texts, min_freq: int = 1) -> list[str]:
    """A character vocabulary that ErnieTokenizer's WordPiece can always decompose into.

    ErnieTokenizer splits CJK characters apart and keeps Latin words and numbers whole; for
    those we add each character both as a word start and as a `##` continuation, so any word
    made of seen characters tokenizes without [UNK].
    """
    from paddlenlp.transformers.bert.tokenizer import BasicTokenizer

    basic = BasicTokenizer(do_lower_case=True)
    counts: Counter = Counter()
    for text in texts:
        for window in text_windows(text):  # PaddleNLP's Python tokenizer held a 51 MB line as 17 M objects
            for token in basic.tokenize(window):
                counts[token[0]] += 1
                counts.update("##" + ch for ch in token[1:])
    pieces = sorted((p for p, c in counts.items() if c >= min_freq), key=lambda p: (-counts[p], p))
    return SPECIAL_TOKENS + [p for p in pieces if p not in SPECIAL_TOKENS]


def ernie_config(shape: str, vocab_size: int, labels: list[str], max_seq_len: int, ngram_buckets: int = 0,
                 pad_token_id: int = 0):
    """A preset shape's config; `pad_token_id` the vocabulary's padding id (the attention mask reads it: a student of
    an XLM-R teacher pads with 1, and 0 is its `<s>`)."""
    from paddlenlp.transformers import ErnieConfig

    layers, hidden, heads, ffn = SHAPES[shape]
    return with_ngram_head(ErnieConfig(
        vocab_size=vocab_size,
        max_position_embeddings=max(512, max_seq_len),
        type_vocab_size=4,
        pad_token_id=pad_token_id,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        intermediate_size=ffn,
    ), ngram_buckets)


def with_ngram_head(config, ngram_buckets: int):
    """`config` marked for the n-gram head (saved in config.json), when `ngram_buckets`."""
    if ngram_buckets:
        config.ngram_buckets = int(ngram_buckets)
        config.ngram_weight = 1.0  # until dev chooses (training scans core.ngram_head.WEIGHT_GRID)
    return config


def classifier_class(ngram_buckets: int):
    """ERNIE's sequence classifier, with the n-gram head beside it when `ngram_buckets` (core.ngram_head)."""
    if ngram_buckets:
        from senti.core.ngram_head import model_class

        return model_class()
    from paddlenlp.transformers import ErnieForSequenceClassification

    return ErnieForSequenceClassification


def build_model(spec: str, labels: list[str], train_texts, max_seq_len: int, trust_pickle: bool = False,
                ngram_buckets: int = 0):
    """Return (model, tokenizer, description) for a preset, a checkpoint folder or a PaddleNLP name; a new model
    (a preset or a pretrained folder) gets the n-gram head when `ngram_buckets`, a checkpoint keeps what it has."""
    if spec in PRESETS:
        return _build_scratch(spec, labels, train_texts, max_seq_len, ngram_buckets)
    path = Path(spec).expanduser()
    if path.is_dir() and not is_checkpoint(path):
        return _build_from_folder(path, labels, train_texts, trust_pickle, ngram_buckets)
    if Path(spec).expanduser().is_dir():
        model, tokenizer, meta = load_checkpoint(Path(spec).expanduser(), trust_pickle)
        if meta.labels != labels:
            raise SentiError(
                f"checkpoint {spec} was trained on labels {meta.labels}, the dataset has {labels}"
            )
        return model, tokenizer, ModelSource("checkpoint", path=str(Path(spec).resolve()), origin=weights_origin(spec))
    if spec.startswith("scratch:"):
        raise SentiError(f"unknown preset '{spec}'; choose scratch:tiny, scratch:small or scratch:<shape> "
                         f"with a shape from {', '.join(SHAPES)}")
    return _load_pretrained(spec, labels)


def readable_folder(path: Path, trim_texts: list[str] | None = None) -> tuple[Path, Any, str]:
    """(PaddleNLP folder to read, what must stay alive while it is read, a note) for a pretrained start: a Hugging
    Face folder is converted (and checked against numpy) into a temporary PaddleNLP folder; others are read as
    they are. The caller ties the second item to the tokenizer, whose save_pretrained copies the vocabulary.
    `trim_texts`: the texts a large Unigram vocabulary is trimmed to (toolkit.training.vocab_trim)."""
    if not is_hf_folder(path):
        return path, None, ""
    from senti.toolkit.training.convert import converted_start

    folder, meta = converted_start(path, trim_texts)
    note = "".join(f"; not in the original, left random: {', '.join(meta.fresh)}" for _ in meta.fresh[:1])
    note += (f"; converted from Hugging Face {meta.model_type} ({meta.weights_file}), last hidden states within "
             f"{meta.check.max_abs_diff:.1e} of the original's")
    if meta.vocab is not None and meta.vocab.trim is not None:
        note += (f"; its vocabulary trimmed to the {meta.vocab.rows:,} of {meta.vocab.trim.of:,} pieces the "
                 f"training texts use (with every single character), the same pieces for all "
                 f"{meta.vocab.trim.texts_checked:,} texts")
    return Path(folder.name), folder, note


def _build_from_folder(path: Path, labels, train_texts, trust_pickle: bool, ngram_buckets: int):
    """A PaddleNLP folder, or a Hugging Face one converted first, with a fresh classifier head."""
    hf = is_hf_folder(path)
    readable, keep, note = readable_folder(path, list(train_texts) if hf else None)
    model, tokenizer, report = pretrained_folder(readable, classifier_class(ngram_buckets), trust_pickle and not hf,
                                                 labels, ngram_buckets)
    if keep is not None:
        tokenizer._senti_vocab_folder = keep
    return model, tokenizer, ModelSource(weights_origin(str(path)), path=str(path.resolve()), loaded=report + note,
                                         ngram_buckets=ngram_buckets)


def _build_scratch(preset: str, labels, train_texts, max_seq_len, ngram_buckets: int = 0):
    from paddlenlp.transformers import ErnieTokenizer

    vocab = build_char_vocab(train_texts)
    # save_pretrained copies the tokenizer's vocab file, so it must outlive this call: the
    # folder is tied to the tokenizer and removed with it.
    folder = tempfile.TemporaryDirectory(prefix="senti-vocab-")
    vocab_file = Path(folder.name) / layout.VOCAB
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = ErnieTokenizer(str(vocab_file))
    tokenizer._senti_vocab_folder = folder
    shape = PRESETS[preset]
    model = classifier_class(ngram_buckets)(ernie_config(shape, len(vocab), labels, max_seq_len, ngram_buckets))
    return model, tokenizer, ModelSource("scratch", preset=preset, shape=shape, vocab_size=len(vocab),
                                         ngram_buckets=ngram_buckets)


def _load_pretrained(name: str, labels):
    """A PaddleNLP model name, downloaded (or read from PaddleNLP's cache) with a fresh head."""
    from paddlenlp.transformers import AutoModelForSequenceClassification, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
        model = AutoModelForSequenceClassification.from_pretrained(
            name,
            num_labels=len(labels),
            id2label=dict(enumerate(labels)),
            label2id={lab: i for i, lab in enumerate(labels)},
        )
    except Exception as err:  # PaddleNLP raises assorted types for unknown names and failed downloads
        raise SentiError(
            f"could not load pretrained model '{name}' ({type(err).__name__}: {str(err).splitlines()[0][:80]}...); "
            f"offline? use a local checkpoint folder or a preset ({', '.join(PRESETS)})"
        ) from None
    return model, tokenizer, ModelSource("paddlenlp", name=name)


def is_checkpoint(path: Path) -> bool:
    """A fine-tuned senti checkpoint (senti.json with labels), as opposed to a pretrained model folder."""
    meta = Path(path) / layout.CHECKPOINT_META
    if not meta.is_file():
        return False
    try:
        data = json.loads(meta.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return True  # let the checkpoint reader say what is wrong with it
    return not (isinstance(data, dict) and data.get("kind") == "pretrained")


def folder_config(path: Path) -> dict:
    """A PaddleNLP folder's model config: `config.json`, or the older `model_config.json` (`init_args`), read as
    untrusted input and range-checked (core.untrusted) before anything is built from it."""
    from senti.core.untrusted import check_model_config, read_json_file

    for name in (layout.PADDLENLP_CONFIG, layout.LEGACY_CONFIG):
        file = Path(path) / name
        if file.is_file() or file.is_symlink():
            data = read_json_file(Path(path), name, "the model config", "model folder")
            if isinstance(data, dict) and isinstance(data.get("init_args"), list) and data["init_args"] and \
                    isinstance(data["init_args"][0], dict):
                data = {**data["init_args"][0], **{k: v for k, v in data.items() if k != "init_args"}}
            if not isinstance(data, dict) or "hidden_size" not in data or "vocab_size" not in data:
                raise SentiError(f"{file}: not an ERNIE/BERT model config (no hidden_size or vocab_size)")
            check_model_config(data, file)
            model_files_inside(Path(path), "model folder")
            return data
    raise SentiError(f"{path}: not a model folder (no {layout.PADDLENLP_CONFIG} or {layout.LEGACY_CONFIG})")


def folder_weights(path: Path, trust_pickle: bool) -> dict:
    """name -> numpy array from model.safetensors, or from a pickled model_state.pdparams with `trust_pickle`."""
    from senti.core.checkpoint import check_weights_format

    path = Path(path)
    if not any((path / n).is_file() for n in (layout.PADDLENLP_SAFE_WEIGHTS, layout.PADDLENLP_WEIGHTS)):
        raise SentiError(f"{path}: no weights ({layout.PADDLENLP_SAFE_WEIGHTS} or {layout.PADDLENLP_WEIGHTS})")
    if check_weights_format(path, trust_pickle):
        from safetensors.numpy import load_file

        try:
            return load_file(str(path / layout.PADDLENLP_SAFE_WEIGHTS))
        except Exception as err:  # safetensors raises its own types for truncated or corrupt files
            raise SentiError(f"{path / layout.PADDLENLP_SAFE_WEIGHTS}: unreadable ({err})") from None
    import paddle

    state = paddle.load(str(path / layout.PADDLENLP_WEIGHTS))
    return {k: v.numpy() if hasattr(v, "numpy") else v for k, v in state.items()}


def load_weights(model, source: dict | Path, trust_pickle: bool = False) -> tuple[list[str], list[str]]:
    """Copy matching tensors into `model` (names with or without the `ernie.` prefix, equal shapes);
    returns (loaded names, names left as they were)."""
    import paddle

    if not isinstance(source, dict):
        source = folder_weights(Path(source), trust_pickle)
    prefix = model.base_model_prefix + "."
    target = model.state_dict()
    loaded, missing = [], []
    for name, param in target.items():
        bare = name[len(prefix):] if name.startswith(prefix) else name
        found = next((source[k] for k in (name, bare, prefix + bare) if k in source), None)
        if found is not None and tuple(found.shape) == tuple(param.shape):
            param.set_value(paddle.to_tensor(found, dtype=param.dtype))
            loaded.append(name)
        else:
            missing.append(name)
    return loaded, missing


def pretrained_folder(path: Path, model_class, trust_pickle: bool = False, labels: list[str] | None = None,
                      ngram_buckets: int = 0):
    """(model, tokenizer, one-line report) from a PaddleNLP model folder (with or without a task head, senti's
    own pretrained folders included): the encoder loads, any head that does not fit is made fresh."""
    from paddlenlp.transformers import ErnieConfig

    from senti.core.json_tokenizer import folder_tokenizer

    path = Path(path)
    data = folder_config(path)
    known = set(ErnieConfig().to_dict())
    settings = {k: v for k, v in data.items() if k in known and k not in ("id2label", "label2id", "num_labels")}
    if labels is not None:
        settings.update(num_labels=len(labels), id2label=dict(enumerate(labels)),
                        label2id={lab: i for i, lab in enumerate(labels)})
    model = model_class(with_ngram_head(ErnieConfig(**settings), ngram_buckets))
    lower = True
    tokenizer_config = path / layout.PADDLENLP_TOKENIZER_CONFIG
    if tokenizer_config.is_file():
        from senti.core.untrusted import read_json_file

        settings_file = read_json_file(path, layout.PADDLENLP_TOKENIZER_CONFIG, "the tokenizer config", "model folder")
        lower = bool(settings_file.get("do_lower_case", True)) if isinstance(settings_file, dict) else True
    tokenizer = folder_tokenizer(path, lower)
    rows = settings["vocab_size"]
    if len(tokenizer.vocab) != rows:
        raise SentiError(f"{path}: {getattr(tokenizer, 'senti_vocab_file', layout.VOCAB)} has {len(tokenizer.vocab)} "
                         f"tokens but the config says vocab_size {rows}")
    loaded, missing = load_weights(model, path, trust_pickle)
    prefix = model.base_model_prefix + "."
    encoder_loaded = [n for n in loaded if n.startswith(prefix)]
    if not encoder_loaded:
        raise SentiError(f"{path}: none of its weights fit the encoder (names or shapes differ); is it an ERNIE "
                         "or BERT folder?")
    encoder_missing = [n for n in missing if n.startswith(prefix)]
    head_missing = [n for n in missing if not n.startswith(prefix)]
    report = f"loaded {len(loaded)} of {len(loaded) + len(missing)} tensors"
    if head_missing:
        report += f"; a fresh head ({', '.join(head_missing)})"
    if encoder_missing:
        report += f"; encoder tensors left random: {', '.join(encoder_missing)}"
    return model, tokenizer, report


def parent_meta(model: str):
    """The metadata of the checkpoint `model` names (a continuation keeps its labels and sequence length), or None
    for any other start."""
    spec = Path(model).expanduser()
    return read_meta(spec) if spec.is_dir() and is_checkpoint(spec) else None
