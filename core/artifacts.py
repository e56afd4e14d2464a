"""Artifact metadata: one small schema per folder format, read with validation and written atomically.

Each artifact folder carries one JSON file (`layout` names them). A schema is a dataclass whose
fields without defaults are the required keys; `read` checks `meta_version` and those keys and
raises one `ArtifactError` naming the file, and `write` renames a finished file into place so a
reader never sees half of one. The export folder's schema lives here because `serving` reads it;
the checkpoint's lives in `senti.core.checkpoint`, bench results' in `senti.benchmarks.results`.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from senti.core import layout
from senti.core.errors import ArtifactError


def write_json_atomic(path: Path, data) -> None:
    """Write JSON beside `path` and rename over it, so a reader never sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, ensure_ascii=False, indent=2)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes files private; artifacts are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def remove_stale_work(folder: Path, name: str, kind: str) -> list[Path]:
    """Remove what killed runs left of `name` (`layout.work_prefix` names whose process is gone); returns them."""
    import re
    import shutil

    removed = []
    pattern = re.compile(rf"^\.{re.escape(name)}\.{re.escape(kind)}-(\d+)-")
    for path in Path(folder).glob(f".{name}.{kind}-*"):
        match = pattern.match(path.name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)
            removed.append(path)
    return removed


@dataclass
class ArtifactMeta:
    """Base of the metadata schemas: `FILE` inside the artifact folder, `KIND` for error messages."""

    FILE: ClassVar[str]
    KIND: ClassVar[str]
    NOT_FOUND_HINT: ClassVar[str] = ""

    @classmethod
    def required_keys(cls) -> list[str]:
        return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]

    @classmethod
    def from_json(cls, data, where: str):
        """Validate a parsed file: an object, a supported `meta_version`, every required key; extra keys kept out."""
        if not isinstance(data, dict):
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata (not a JSON object)")
        version = data.get("meta_version")
        if version not in layout.SUPPORTED_META_VERSIONS:
            raise ArtifactError(f"{where}: {cls.KIND} metadata version {version!r} is not one this senti reads "
                                f"({', '.join(map(str, layout.SUPPORTED_META_VERSIONS))}); re-create it with this "
                                "version of senti")
        missing = [k for k in cls.required_keys() if k not in data]
        if missing:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata (missing {', '.join(missing)})")
        known = {f.name for f in fields(cls)}
        meta = cls(**{k: v for k, v in data.items() if k in known})
        problem = meta.problem()
        if problem:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata ({problem})")
        return meta

    def problem(self) -> str | None:
        """What is wrong with the values (types a reader relies on), or None."""
        return None

    @classmethod
    def read(cls, folder: Path):
        path = Path(folder) / cls.FILE
        if not path.is_file():
            raise ArtifactError(f"{folder}: not a senti {cls.KIND} (no {cls.FILE}){cls.NOT_FOUND_HINT}")
        return cls.parse(path.read_bytes(), str(path))

    @classmethod
    def parse(cls, raw: bytes, where: str):
        """The schema from a file's bytes (for a reader that keeps them, to hash what it loaded)."""
        try:
            data = json.loads(raw.decode("utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata ({err})") from None
        except RecursionError:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata (nested too deeply)") from None
        return cls.from_json(data, where)

    def to_json(self) -> dict:
        return asdict(self)

    def write(self, folder: Path) -> None:
        write_json_atomic(Path(folder) / self.FILE, self.to_json())


@dataclass
class SplitRecipe:
    """How a model's train/dev/test splits were cut, so eval and export cut the very same ones."""

    dataset: str
    seed: int
    text_column: str | None = None
    label_column: str | None = None
    # A hash of the rows (texts and labels, in order) whatever the path: `--replay` finds a parent's data by it.
    fingerprint: str | None = None


def labels_problem(labels, max_seq_len) -> str | None:
    if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels) or not isinstance(max_seq_len, int):
        return "labels must be a list of strings and max_seq_len an integer"
    return None


@dataclass
class ExportMeta(ArtifactMeta):
    """`export.json`: what `senti export` wrote and proved, read by `Predictor`."""

    FILE: ClassVar[str] = layout.EXPORT_META
    KIND: ClassVar[str] = "export"
    NOT_FOUND_HINT: ClassVar[str] = "; run senti export first"

    labels: list[str]
    max_seq_len: int
    tokenizer: dict  # vocab file, lower-casing and special tokens, as ErnieTokenizer had them
    formats: dict  # format name -> {"files": [...], "parity": {..., "fit": bool}}
    model: dict  # shape: hidden_size, num_hidden_layers, num_attention_heads, intermediate_size, vocab_size
    meta_version: int = layout.META_VERSION
    written_by: str = "senti export"
    source_checkpoint: str | None = None
    data: dict | None = None  # the SplitRecipe the parity texts were cut with
    io: dict = field(default_factory=dict)
    spec: dict = field(default_factory=dict)
    parity_texts: int = 0
    reference_accuracy: float | None = None
    triton: str | None = None
    versions: dict = field(default_factory=dict)
    seconds: float | None = None
    # A few parity texts and the dynamic graph's logits for them: a reload checks a new model against these.
    parity_sample: dict | None = None
    # Drift figures (senti.serving.drift) of the parity (dev) texts, to compare traffic with.
    reference_stats: dict | None = None

    TOKENIZER_KEYS: ClassVar[tuple] = ("vocab_file", "do_lower_case", "unk_token", "cls_token", "sep_token",
                                       "pad_token")

    def problem(self) -> str | None:
        if not isinstance(self.formats, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("parity"), dict) for v in self.formats.values()):
            return "formats must map each format to its files and parity record"
        if problem := labels_problem(self.labels, self.max_seq_len):
            return problem
        if len(set(self.labels)) != len(self.labels) or len(self.labels) < 2:
            return f"labels must be two or more distinct names; got {self.labels}"
        if not isinstance(self.tokenizer, dict):
            return "tokenizer settings must be an object"
        if missing := [k for k in self.TOKENIZER_KEYS if k not in self.tokenizer]:
            return f"tokenizer settings lack {', '.join(missing)}"
        return None


def read_export_meta(export_dir: Path) -> ExportMeta:
    """The export folder's validated `export.json`, or one clear error."""
    return ExportMeta.read(export_dir)
