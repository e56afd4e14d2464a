"""A multilingual Unigram vocabulary trimmed to the pieces a corpus uses, so a 250,000-piece model (380 MB of XLM-R
embeddings at 384 wide) trains and exports at the size of what Chinese reviews need.

Kept: every piece the corpus's texts are cut into, every single-character piece (an unseen character still has its
own piece, never <unk>), and the special tokens. A Unigram tokenizer picks the most probable cut among the pieces it
has; removing pieces that a text's best cut does not use leaves that cut the best, so every corpus text gets the same
pieces as before, under new ids. That is checked on every corpus text before the trimmed definition is used.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from senti.core.errors import ArtifactError
from senti.core.json_tokenizer import load_definition

TRIM_ABOVE = 100_000  # vocabularies larger than this are trimmed when a corpus is given
METASPACE = "\u2581"  # SentencePiece's word-start mark


@dataclass
class Trimmed:
    definition: str
    kept: np.ndarray  # the old id of each new id, in order
    texts_checked: int


def _single_characters(vocab: list) -> set[int]:
    return {i for i, (piece, _score) in enumerate(vocab) if len(piece.replace(METASPACE, "")) <= 1}


def trim_unigram(definition: str, texts: list[str], where) -> Trimmed:
    """The Unigram definition trimmed to `texts`' pieces (plus single characters and specials), with the old id of
    each kept piece; refused in one line if any text's pieces change."""
    data = json.loads(definition)
    model = data["model"]
    if model.get("type") != "Unigram":
        raise ArtifactError(f"{where}: only Unigram vocabularies are trimmed (this one is {model.get('type')})")
    tokenizer = load_definition(definition, where)
    before = [e.ids for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
    added = {int(a["id"]) for a in data.get("added_tokens") or []}
    keep = set().union(*map(set, before)) | added | {int(model["unk_id"])} | _single_characters(model["vocab"])
    # Pieces first, then the added tokens that are not pieces (ids past the model's vocabulary), in their order.
    kept = np.array(sorted(keep), dtype=np.int64)
    pieces = kept[kept < len(model["vocab"])]
    new_id = {int(old): new for new, old in enumerate(kept)}
    model["vocab"] = [model["vocab"][i] for i in pieces]
    model["unk_id"] = new_id[int(model["unk_id"])]
    for token in data.get("added_tokens") or []:
        token["id"] = new_id[int(token["id"])]
    data["post_processor"] = None  # its ids are the old ones; senti adds [CLS]/[SEP] itself
    trimmed = json.dumps(data, ensure_ascii=False)
    after = [e.ids for e in load_definition(trimmed, where).encode_batch(texts, add_special_tokens=False)]
    changed = sum(1 for a, b in zip(before, after) if [new_id[i] for i in a] != b)
    if changed:
        raise ArtifactError(f"{where}: trimming the vocabulary changed the pieces of {changed} of {len(texts)} texts; "
                            "not trimmed")
    return Trimmed(trimmed, kept, len(texts))
