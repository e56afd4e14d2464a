"""Model specs: from-scratch presets (random weights, character vocabulary), PaddleNLP names, checkpoints."""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from serving import layout
from export.checkpoint import load_checkpoint
from toolkit.errors import SentiError

# Shapes of the from-scratch presets. `scratch:tiny` trains an epoch of ChnSentiCorp in well
# under 3 minutes on 2 CPU cores; `scratch:small` is the distillation teacher.
PRESETS: dict[str, dict] = {
    "scratch:tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
    "scratch:small": dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024),
}
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
        for token in basic.tokenize(text):
            counts[token[0]] += 1
            counts.update("##" + ch for ch in token[1:])
    pieces = sorted((p for p, c in counts.items() if c >= min_freq), key=lambda p: (-counts[p], p))
    return SPECIAL_TOKENS + [p for p in pieces if p not in SPECIAL_TOKENS]


def ernie_config(preset: str, vocab_size: int, labels: list[str], max_seq_len: int):
    from paddlenlp.transformers import ErnieConfig

    return ErnieConfig(
        vocab_size=vocab_size,
        max_position_embeddings=max(512, max_seq_len),
        type_vocab_size=4,
        pad_token_id=0,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={lab: i for i, lab in enumerate(labels)},
        **PRESETS[preset],
    )


def build_model(spec: str, labels: list[str], train_texts, max_seq_len: int):
    """Return (model, tokenizer, description) for a preset, a checkpoint folder or a PaddleNLP name."""
    if spec in PRESETS:
        return _build_scratch(spec, labels, train_texts, max_seq_len)
    if Path(spec).expanduser().is_dir():
        model, tokenizer, meta = load_checkpoint(Path(spec).expanduser())
        if meta["labels"] != labels:
            raise SentiError(
                f"checkpoint {spec} was trained on labels {meta['labels']}, the dataset has {labels}"
            )
        return model, tokenizer, {"source": "checkpoint", "path": str(Path(spec).resolve())}
    if spec.startswith("scratch:"):
        raise SentiError(f"unknown preset '{spec}'; choose one of {', '.join(PRESETS)}")
    return _load_pretrained(spec, labels)


def _build_scratch(preset: str, labels, train_texts, max_seq_len):
    from paddlenlp.transformers import ErnieForSequenceClassification, ErnieTokenizer

    vocab = build_char_vocab(train_texts)
    # save_pretrained copies the tokenizer's vocab file, so it must outlive this call: the
    # folder is tied to the tokenizer and removed with it.
    folder = tempfile.TemporaryDirectory(prefix="senti-vocab-")
    vocab_file = Path(folder.name) / layout.VOCAB
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = ErnieTokenizer(str(vocab_file))
    tokenizer._senti_vocab_folder = folder
    model = ErnieForSequenceClassification(ernie_config(preset, len(vocab), labels, max_seq_len))
    return model, tokenizer, {"source": "scratch", "preset": preset, "vocab_size": len(vocab)}


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
    return model, tokenizer, {"source": "paddlenlp", "name": name}
