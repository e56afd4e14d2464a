"""The one door into an export folder: every way of serving it (`Predictor.load`, so `senti serve` at start-up,
on reload and in each worker, `senti predict`, `select`, `eval`, `label`, Ray) reads and checks it here.

An export folder is untrusted input. Each file that scores is read once, from inside the folder only (no path
in export.json, absolute path or symbolic link may lead out of it, and only regular files of bounded size are
read), and the model's version is a hash of exactly those bytes: export.json, the vocabulary and the model.
Once opened, the model must take an input of `max_seq_len` tokens, give one logit per label, and reproduce the
answers recorded for its own parity texts at export. Every failure is one line naming the file and the problem.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from senti.core import layout
from senti.core.artifacts import ExportMeta
from senti.core.errors import ArtifactError
from senti.core.untrusted import inside, read_bounded
from senti.serving.parity import MAX_PARITY_TEXTS

MAX_META_BYTES = 16 << 20  # export.json is a few kB; a file of more is not one senti wrote
MAX_VOCAB_BYTES = 64 << 20
MAX_MODEL_BYTES = 8 << 30


# export.json as last read in this process, by its resolved path: (the file's identity, what read_meta returned).
_READ: dict[str, tuple[tuple[int, int, int], tuple[ExportMeta, bytes]]] = {}


def read_meta(export_dir: Path) -> tuple[ExportMeta, bytes]:
    """export.json, validated, and the bytes it was parsed from: read once per process (`senti serve` chose its
    placement from it and its server read it again; the Ray driver twice), again only when the file changed (a
    reload, a new export renamed into place)."""
    path = Path(export_dir) / ExportMeta.FILE
    if path.exists() and not path.is_file():  # a FIFO or a folder: said as such, never opened (a FIFO would block)
        raise ArtifactError(f"{path}: the export metadata is not a regular file")
    if not path.is_file():
        raise ArtifactError(f"{export_dir}: not a senti export (no {ExportMeta.FILE}){ExportMeta.NOT_FOUND_HINT}")
    resolved = inside(export_dir, ExportMeta.FILE, "metadata")
    stat = resolved.stat()
    identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    known = _READ.get(str(resolved))
    if known is not None and known[0] == identity:
        return known[1]
    result = _parse_meta(path)
    _READ[str(resolved)] = (identity, result)
    return result


def _parse_meta(path: Path) -> tuple[ExportMeta, bytes]:
    """export.json's bytes, parsed and checked against its parity evidence."""
    raw = read_bounded(path, MAX_META_BYTES, "the export metadata")
    meta = ExportMeta.parse(raw, str(path))  # the schema's own checks: labels, tokenizer settings, formats
    sample = meta.parity_sample
    if sample is None or not sample.texts or not isinstance(sample.logits, list):
        raise ArtifactError(f"{path}: no parity sample to check the model against; re-export it with this senti")
    if not isinstance(sample.texts, list) or len(sample.texts) > MAX_PARITY_TEXTS:
        raise ArtifactError(f"{path}: the parity sample holds more than {MAX_PARITY_TEXTS} texts; senti export "
                            "records 16")
    # The labels recorded beside the parity answers are what a swap of the label names cannot pass: a folder
    # without them is refused (a check skipped when its evidence is missing let a swapped folder serve inverted).
    if sample.labels is None:
        raise ArtifactError(f"{path}: no labels recorded with the parity answers; re-export it with this senti")
    if sample.labels != meta.labels:
        raise ArtifactError(f"{path}: labels {meta.labels} differ from those recorded with the parity answers "
                            f"{sample.labels}")
    return meta, raw


def read_vocab_text(export_dir: Path, meta: ExportMeta) -> tuple[str, bytes]:
    path = inside(export_dir, meta.tokenizer.vocab_file, "vocabulary")
    if not path.is_file():
        raise ArtifactError(f"{path}: the vocabulary is not a file")
    raw = read_bounded(path, MAX_VOCAB_BYTES, "the vocabulary")
    try:
        return raw.decode("utf-8"), raw
    except UnicodeDecodeError as err:
        raise ArtifactError(f"{path}: the vocabulary is not UTF-8 text (byte {err.start})") from None


def model_bytes(export_dir: Path, fmt) -> tuple[bytes | None, hashlib._Hash]:
    """(the model file's bytes for ONNX Runtime to load, or None for Paddle's folder; a hash of what is read)."""
    path = inside(export_dir, fmt.path, f"the {fmt.name} model")
    digest = hashlib.sha256()
    if path.is_dir():  # Paddle Inference: its files are hashed here and opened by path
        try:
            names = layout.paddle_model_files(path)
        except FileNotFoundError as err:
            raise ArtifactError(str(err)) from None
        for name in names:
            file = inside(export_dir, str(Path(fmt.path) / Path(name).name), f"the {fmt.name} model")
            digest.update(read_bounded(file, MAX_MODEL_BYTES, f"the {fmt.name} model"))
        return None, digest
    data = read_bounded(path, MAX_MODEL_BYTES, f"the {fmt.name} model")
    digest.update(data)
    return data, digest


def version_of(meta_raw: bytes, vocab_raw: bytes, model_digest) -> str:
    """The model's version as answers carry it: a hash of everything that scores, from the bytes loaded."""
    digest = hashlib.sha256()
    for part in (meta_raw, vocab_raw, model_digest.digest()):
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()[:12]


def check_model(predictor) -> None:
    """The opened model takes `max_seq_len` tokens, gives a logit per label, and reproduces its parity answers."""
    import numpy as np

    from senti.serving.backends import FORMATS
    from senti.serving.parity import load_problem

    where = predictor.export_dir / ExportMeta.FILE
    width = predictor.max_seq_len
    probe = np.full((1, width), predictor.tokenizer.pad_id, dtype=np.int64)
    probe[0, 0], probe[0, -1] = predictor.tokenizer.cls_id, predictor.tokenizer.sep_id
    try:
        out = np.asarray(predictor.backend(probe, np.zeros_like(probe)))
    except Exception as err:
        raise ArtifactError(f"{where}: the model cannot read max_seq_len {width} tokens "
                            f"({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''})") from None
    if out.shape != (1, len(predictor.labels)):
        raise ArtifactError(f"{where}: the model gives {out.shape[-1]} logits per text but the metadata names "
                            f"{len(predictor.labels)} labels {predictor.labels}")
    sample = predictor.meta.parity_sample
    assert sample is not None  # _parse_meta refused a folder without one
    expected = np.asarray(sample.logits, dtype=np.float32)
    got = predictor.logits(sample.texts)[0]
    if got.shape != expected.shape:
        raise ArtifactError(f"{where}: the parity sample records {expected.shape} logits; the model gives {got.shape}")
    record = predictor.meta.formats.get(predictor.backend_name)
    recorded = record.parity.max_abs_logit_diff if record is not None else None
    problem = load_problem(got, expected, FORMATS[predictor.backend_name].tolerance, recorded or 0.0)
    if problem:
        raise ArtifactError(f"{predictor.export_dir}: the model does not reproduce its recorded parity answers "
                            f"({problem}); the vocabulary, the model or the metadata was changed after export")
