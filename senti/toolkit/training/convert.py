"""`senti convert` and a Hugging Face start for training: a BERT-family folder made into a PaddleNLP ERNIE folder
(`model.safetensors`, `config.json`, `vocab.txt`, `tokenizer_config.json`) plus `convert.json`, which records where
it came from and the figures of its check against a numpy forward pass of the original tensors."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from senti.core import layout
from senti.core.artifacts import ArtifactMeta, Record, TokenizerSettings
from senti.core.errors import ArtifactError
from senti.core.json_tokenizer import JsonTokenizer
from senti.serving.parity import CONVERSION_TOLERANCE, conversion_fits
from senti.toolkit.training.bert_reference import BertShape, bert_forward
from senti.toolkit.training.hf_convert import (
    CHECK_TEXTS,
    ERNIE_EPS,
    HFFolder,
    ernie_settings,
    ernie_weights,
    position_offset,
    read_hf_folder,
)
from senti.toolkit.training.vocab_trim import TRIM_ABOVE, trim_unigram


@dataclass
class ConversionCheck(Record):
    """The converted model against a numpy forward pass of the original: the last hidden states on a few texts."""

    texts: int
    tokens: int
    max_abs_diff: float
    tolerance: float


@dataclass
class VocabTrim(Record):
    """A large Unigram vocabulary trimmed to the pieces a corpus uses (toolkit.training.vocab_trim)."""

    pieces: int
    texts_checked: int
    of: int


@dataclass
class VocabRows(Record):
    """The original's embedding rows kept, of how many, and the trim when trimmed."""

    rows: int
    of: int
    trim: VocabTrim | None = None


@dataclass
class ConvertMeta(ArtifactMeta):
    """`convert.json`: the Hugging Face folder a PaddleNLP folder was made from, and how close the two compute."""

    FILE: ClassVar[str] = layout.CONVERT_META
    KIND: ClassVar[str] = "converted model"
    source: str
    model_type: str
    weights_file: str
    check: ConversionCheck
    meta_version: int = layout.META_VERSION
    written_by: str = "senti convert"
    tensors: int = 0
    left_out: list[str] = field(default_factory=list)  # the original's tensors ERNIE has no place for (heads)
    fresh: list[str] = field(default_factory=list)  # ERNIE's tensors the original has not (a missing pooler)
    tokenizer: str = layout.VOCAB  # vocab.txt (WordPiece, ErnieTokenizer) or tokenizer.json (core.json_tokenizer)
    vocab: VocabRows | None = None  # rows kept of the original's embeddings, and the trim when trimmed
    versions: dict[str, str] = field(default_factory=dict)


@dataclass
class Vocabulary:
    """What the converted model reads text with: its tokenizer (ErnieTokenizer over vocab.txt, or a JsonTokenizer),
    and the original's embedding row of each of its ids (all rows, the tokenizer's only, or a trimmed set)."""

    tokenizer: Any
    rows: np.ndarray
    trim: VocabTrim | None = None


def _vocabulary(folder: Path, hf: HFFolder, trim_texts: list[str] | None) -> Vocabulary:
    tok = hf.tokenizer
    if tok.vocab is not None:
        from paddlenlp.transformers import ErnieTokenizer

        (folder / layout.VOCAB).write_text("\n".join(tok.vocab) + "\n", encoding="utf-8")
        return Vocabulary(ErnieTokenizer(str(folder / layout.VOCAB), do_lower_case=tok.do_lower_case),
                          np.arange(tok.size))
    definition, rows, trim = tok.definition or "", np.arange(tok.size), None
    if trim_texts and tok.size > TRIM_ABOVE and tok.kind == "Unigram":
        trimmed = trim_unigram(definition, trim_texts, hf.path / layout.TOKENIZER_JSON)
        definition, rows, trim = trimmed.definition, trimmed.kept, VocabTrim(int(len(trimmed.kept)),
                                                                             trimmed.texts_checked, tok.size)
    return Vocabulary(JsonTokenizer(definition, hf.path / layout.TOKENIZER_JSON, **tok.specials), rows, trim)


def _model(hf: HFFolder, weights: dict[str, np.ndarray], vocab_size: int):
    import paddle
    from paddlenlp.transformers import ErnieConfig, ErnieModel

    model = ErnieModel(ErnieConfig(**{**ernie_settings(hf.config), "vocab_size": vocab_size}))
    state = model.state_dict()
    wrong = [n for n, v in weights.items() if n in state and tuple(state[n].shape) != v.shape]
    if wrong:
        raise ArtifactError(f"{hf.path / hf.weights_file}: tensor {wrong[0]} has shape "
                            f"{weights[wrong[0]].shape}, the config's model wants {tuple(state[wrong[0]].shape)}")
    for name, value in weights.items():
        state[name].set_value(paddle.to_tensor(value))
    model.eval()
    return model


def check_conversion(hf: HFFolder, model, vocabulary: Vocabulary) -> ConversionCheck:
    """The converted model's last hidden states against a numpy forward pass of the original tensors (fed the
    original's ids of the same pieces), on a few texts: refused in one line unless serving.parity.conversion_fits."""
    import paddle

    ids = [vocabulary.tokenizer(t)["input_ids"] for t in CHECK_TEXTS]
    width = max(map(len, ids))
    pad = hf.config.get("pad_token_id", 0)
    batch = np.array([row + [pad] * (width - len(row)) for row in ids], dtype=np.int64)
    mask = np.array([[1] * len(row) + [0] * (width - len(row)) for row in ids], dtype=np.int64)
    shape = BertShape(hf.config["num_hidden_layers"], hf.config["num_attention_heads"],
                      float(hf.config.get("layer_norm_eps", ERNIE_EPS)), hf.config.get("hidden_act", "gelu"),
                      position_offset(hf.config))
    expected = bert_forward(hf.weights, shape, vocabulary.rows[batch], mask)
    with paddle.no_grad():
        got = model(paddle.to_tensor(batch), attention_mask=paddle.to_tensor(mask))[0].numpy()
    real = mask.astype(bool)
    largest = float(np.abs(got[real] - expected[real]).max())
    if not conversion_fits(largest):
        raise ArtifactError(f"{hf.path}: the converted model differs from the original by {largest:.2e} (over "
                            f"{CONVERSION_TOLERANCE:g}) in its last hidden states; not converted")
    return ConversionCheck(texts=len(CHECK_TEXTS), tokens=int(real.sum()), max_abs_diff=largest,
                           tolerance=CONVERSION_TOLERANCE)


def convert_folder(source: Path, out_dir: Path, trim_texts: list[str] | None = None) -> ConvertMeta:
    """Convert a Hugging Face BERT-family folder into a checked PaddleNLP ERNIE folder at `out_dir`; a Unigram
    vocabulary of over TRIM_ABOVE pieces is trimmed to what `trim_texts` use (toolkit.training.vocab_trim)."""
    from senti.toolkit.training.checkpoint import save_checkpoint, versions

    hf = read_hf_folder(Path(source))
    weights, left_out = ernie_weights(hf)
    with tempfile.TemporaryDirectory(prefix="senti-convert-") as scratch:
        vocabulary = _vocabulary(Path(scratch), hf, trim_texts)
        name = "embeddings.word_embeddings.weight"
        weights[name] = np.ascontiguousarray(weights[name][vocabulary.rows])
        model = _model(hf, weights, len(vocabulary.rows))
        check = check_conversion(hf, model, vocabulary)
        meta = ConvertMeta(source=str(Path(source).resolve()), model_type=hf.config["model_type"],
                           weights_file=hf.weights_file, check=check, tensors=len(weights), left_out=left_out,
                           fresh=[n for n in model.state_dict() if n not in weights],
                           tokenizer=TokenizerSettings.of(vocabulary.tokenizer).vocab_file,
                           vocab=VocabRows(int(len(vocabulary.rows)), int(hf.config["vocab_size"]), vocabulary.trim),
                           versions=versions())
        save_checkpoint(model, vocabulary.tokenizer, Path(out_dir), meta)
    return meta


def converted_start(source: Path, trim_texts: list[str] | None = None
                    ) -> tuple[tempfile.TemporaryDirectory, ConvertMeta]:
    """A Hugging Face folder converted into a temporary PaddleNLP folder, for training to start from (the caller
    keeps the returned folder alive while it reads it)."""
    folder = tempfile.TemporaryDirectory(prefix="senti-hf-")
    meta = convert_folder(source, Path(folder.name), trim_texts)
    return folder, meta
