"""Artifact metadata: one small schema per folder format, read with validation and written atomically.

Each artifact folder carries one JSON file (`layout` names them). A schema is a dataclass whose
fields without defaults are the required keys; `read` checks `meta_version` and those keys and
raises one `ArtifactError` naming the file, and `write` renames a finished file into place so a
reader never sees half of one. The export folder's schema lives here because `serving` reads it;
the checkpoint's lives in `senti.core.checkpoint`, bench results' in `senti.benchmarks.results`.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field, fields, is_dataclass
from pathlib import Path
from types import UnionType
from typing import Any, ClassVar, Union, get_args, get_origin, get_type_hints

from senti.core import layout
from senti.core.errors import ArtifactError


def write_json_atomic(path: Path, data) -> None:
    """Write JSON beside `path` and rename over it, so a reader never sees half a file."""
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, indent=2) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write `text` beside `path` and rename over it, so a reader never sees half a file."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
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


def required_fields(cls) -> list[str]:
    """The fields of the dataclass `cls` without a default: the keys a record read from a file must hold."""
    return [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]


def known_fields(cls, data: dict) -> dict:
    """The entries of `data` that are fields of the dataclass `cls`: a record read from a file keeps out keys it
    does not know (a newer senti's, or a hand-edited file's)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


# A value of a settings mapping kept as given (a command's settings by name): JSON's scalars, or a list of them.
JSONScalar = str | int | float | bool | None
Setting = JSONScalar | list[JSONScalar]
# Any JSON value: only for records whose keys vary by their maker (a bench suite's measurements, described by the
# suite's report), never for one a reader in senti looks inside by key.
JSONValue = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]


class Record:
    """A record nested in a schema (a model's origin, one evaluation, a worker's census...): read from a JSON object
    with its required keys checked, keys it does not know kept out and nested records typed by their fields'
    annotations; written with the optional fields that hold nothing left out, as the dicts it replaces were."""

    @classmethod
    def from_json(cls, data):
        if not isinstance(data, dict):
            raise ValueError(f"{cls.__name__} must be an object")
        missing = [name for name in required_fields(cls) if name not in data]
        if missing:
            raise ValueError(f"{cls.__name__} misses {', '.join(missing)}")
        return cls(**typed_values(cls, known_fields(cls, data)))

    def to_json(self) -> dict:
        return {f.name: to_plain(getattr(self, f.name)) for f in fields(self)  # type: ignore[arg-type]
                if not (f.default is None and getattr(self, f.name) is None)}


def to_plain(value):
    """A record, or lists and mappings of them, as JSON values."""
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, list | tuple):
        return [to_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return asdict(value)
    return value


def typed_values(cls, values: dict) -> dict:
    """`values` with each field whose annotation is a Record (or an optional one, a list or a mapping of them)
    read as that record; ValueError when one is malformed."""
    hints = get_type_hints(cls)
    return {name: _typed(hints[name], value) for name, value in values.items()}


def _is_record(hint) -> bool:
    return isinstance(hint, type) and issubclass(hint, Record)


def _typed(hint, value):
    origin, args = get_origin(hint), get_args(hint)
    if _is_record(hint):
        return value if isinstance(value, hint) else hint.from_json(value)
    if origin in (Union, UnionType):
        inner = [a for a in args if a is not type(None)]
        return None if value is None else _typed(inner[0], value) if len(inner) == 1 else value
    if origin is list and args and _is_record(args[0]):
        if not isinstance(value, list):
            raise ValueError(f"a list of {args[0].__name__} records expected")
        return [_typed(args[0], v) for v in value]
    if origin is dict and len(args) == 2 and _is_record(args[1]):
        if not isinstance(value, dict):
            raise ValueError(f"a mapping of {args[1].__name__} records expected")
        return {k: _typed(args[1], v) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class TokenizerSettings:
    """How text becomes ids, as PaddleNLP's ErnieTokenizer had it: the `tokenizer` record of senti.json and
    export.json. `of` takes it from a tokenizer; `serving.tokenizer.FastTokenizer.from_settings` reads it."""

    vocab_file: str = layout.VOCAB
    do_lower_case: bool = True
    unk_token: str = "[UNK]"
    cls_token: str = "[CLS]"
    sep_token: str = "[SEP]"
    pad_token: str = "[PAD]"
    pad_token_id: int | None = None
    tokenizer_class: str = "ErnieTokenizer"  # "class" in the files

    TEXT_KEYS: ClassVar[tuple[str, ...]] = ("vocab_file", "unk_token", "cls_token", "sep_token", "pad_token",
                                            "tokenizer_class")
    # What an export must spell out: serving rebuilds the tokenizer from these alone.
    EXPORT_KEYS: ClassVar[tuple[str, ...]] = ("vocab_file", "do_lower_case", "unk_token", "cls_token", "sep_token",
                                              "pad_token")

    @classmethod
    def of(cls, tokenizer) -> TokenizerSettings:
        return cls(vocab_file=getattr(tokenizer, "senti_vocab_file", layout.VOCAB),
                   do_lower_case=bool(getattr(tokenizer, "do_lower_case", True)), unk_token=tokenizer.unk_token,
                   cls_token=tokenizer.cls_token, sep_token=tokenizer.sep_token, pad_token=tokenizer.pad_token,
                   pad_token_id=tokenizer.pad_token_id, tokenizer_class=type(tokenizer).__name__)

    @classmethod
    def from_json(cls, data, required: tuple[str, ...] = ()) -> TokenizerSettings:
        """From a file's record (ValueError saying what is wrong); keys left out take ErnieTokenizer's defaults."""
        if not isinstance(data, dict):
            raise ValueError("tokenizer settings must be an object")
        if missing := [k for k in required if k not in data]:
            raise ValueError(f"tokenizer settings lack {', '.join(missing)}")
        values = known_fields(cls, {("tokenizer_class" if k == "class" else k): v for k, v in data.items()})
        if text := [k for k in cls.TEXT_KEYS if k in values and not isinstance(values[k], str)]:
            raise ValueError(f"tokenizer settings: {', '.join(text)} must be text")
        if not isinstance(values.get("do_lower_case", True), bool):
            raise ValueError("tokenizer settings: do_lower_case must be true or false")
        pad_id = values.get("pad_token_id")
        if pad_id is not None and (isinstance(pad_id, bool) or not isinstance(pad_id, int)):
            raise ValueError("tokenizer settings: pad_token_id must be an integer")
        return cls(**values)

    @classmethod
    def from_export_json(cls, data) -> TokenizerSettings:
        return cls.from_json(data, cls.EXPORT_KEYS)

    def to_json(self) -> dict:
        values = asdict(self)
        return {"class": values.pop("tokenizer_class"), **values}


@dataclass
class Parity:
    """One exported format against the dynamic graph (`export.parity`): `fit` None when it could not be run here."""

    fit: bool | None
    reason: str = ""
    accuracy: float | None = None
    label_agreement: float | None = None
    max_abs_logit_diff: float | None = None
    max_batch_dependence: float | None = None  # the same texts alone and in batches of 32
    max_abs_logit_diff_by_shape: dict[str, float] = field(default_factory=dict)
    accuracy_drop: float | None = None  # INT8 formats are judged by it
    texts: int = 0

    @classmethod
    def from_json(cls, data) -> Parity:
        if not isinstance(data, dict) or "fit" not in data:
            raise ValueError("a format's parity record must be an object with fit")
        return cls(**known_fields(cls, data))


@dataclass
class MadeFacts(Record):
    """What a format's maker recorded beside its files (senti.export.pipeline's makers)."""

    fusions: dict[str, int] | None = None  # onnx-opt: ONNX Runtime's fused operators by kind
    quantized_matmuls: int | None = None  # onnx-int8-static
    calibration: dict[str, int | str] | None = None  # onnx-int8-static: the texts and where they came from


@dataclass
class FormatRecord:
    """One format in export.json: its files, its parity, and what its maker recorded (ONNX fusions, calibration)."""

    files: list[str]
    parity: Parity
    made: MadeFacts = field(default_factory=MadeFacts)

    @classmethod
    def from_json(cls, data) -> FormatRecord:
        if not isinstance(data, dict):
            raise ValueError("formats must map each format to its files and parity record")
        rest = {k: v for k, v in data.items() if k not in ("files", "parity")}
        return cls(files=list(data.get("files") or []), parity=Parity.from_json(data.get("parity")),
                   made=MadeFacts.from_json(rest))

    def to_json(self) -> dict:
        return {"files": self.files, **self.made.to_json(), "parity": asdict(self.parity)}


@dataclass(frozen=True)
class ExportSpec(Record):
    """What an export must look like, declared once: input and output names, dynamic axes, opset (tolerances are
    per format, in senti.serving.backends.FORMATS)."""

    input_names: tuple[str, ...] = layout.INPUT_NAMES
    input_dtype: str = "int64"
    dynamic_axes: tuple[str, ...] = ("batch", "sequence")
    output_name: str = layout.OUTPUT_NAME
    opset: int = 14

    def __post_init__(self):  # read from JSON, the tuples arrive as lists
        object.__setattr__(self, "input_names", tuple(self.input_names))
        object.__setattr__(self, "dynamic_axes", tuple(self.dynamic_axes))


@dataclass
class ModelShape(Record):
    """An exported encoder's size."""

    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int


@dataclass
class GraphIO(Record):
    """The exported graph's inputs and outputs, each with its shape (symbolic dimensions by name)."""

    inputs: dict[str, list[str | int]]
    outputs: dict[str, list[str | int]]
    opset: int | None = None
    nodes: int | None = None


@dataclass
class ParitySample(Record):
    """A few parity texts with the dynamic graph's logits for them and the label names beside the answers: a
    reload checks a new model against these, and a swap of names in export.json cannot pass."""

    texts: list[str]
    logits: list[list[float]]
    labels: list[str] | None = None


@dataclass
class ConfidenceHistogram(Record):
    upper_bounds: list[float]
    shares: list[float]


@dataclass
class DriftFigures(Record):
    """Drift figures of a set of answers (senti.serving.drift): what traffic is compared with."""

    texts: int
    low_confidence_share: float
    mean_confidence: float
    label_shares: dict[str, float]
    truncated_share: float
    unknown_token_share: float
    confidence_histogram: ConfidenceHistogram


# How logits become probabilities (senti.core.calibration fits and applies them).
CALIBRATION_METHODS = ("temperature", "vector")


@dataclass
class Calibration(Record):
    """How the model's logits become probabilities: softmax(logits / temperature + bias), fitted on `texts` dev
    texts; the dev figures before and after beside it."""

    temperature: float
    bias: list[float] | None = None  # one per class, the first 0 (vector scaling); None for temperature alone
    method: str = "temperature"
    texts: int = 0
    fitted_on: str = "dev"
    log_loss_before: float | None = None
    log_loss_after: float | None = None
    ece_before: float | None = None
    ece_after: float | None = None

    def problem(self, classes: int) -> str | None:
        """Why these values cannot be applied to a model of `classes` outputs, or None."""
        t = self.temperature
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t) or t <= 0:
            return f"calibration temperature must be a positive finite number; got {t!r}"
        if self.bias is not None:
            if not isinstance(self.bias, list) or len(self.bias) != classes or not all(
                    isinstance(b, int | float) and not isinstance(b, bool) and math.isfinite(b) for b in self.bias):
                return f"calibration bias must be {classes} finite numbers; got {self.bias!r}"
        if self.method not in CALIBRATION_METHODS:
            return f"calibration method must be one of {', '.join(CALIBRATION_METHODS)}; got {self.method!r}"
        return None


@dataclass
class Abstention(Record):
    """Below `threshold` (the calibrated probability of the answer) the answer is marked unsure; chosen on dev for
    `target` ("precision=0.97" or "coverage=0.9"), which gave `dev_coverage` answered at `dev_precision`."""

    threshold: float
    target: str
    texts: int
    dev_coverage: float
    dev_precision: float

    def problem(self) -> str | None:
        t = self.threshold
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0.0 <= t <= 1.0:
            return f"abstention threshold must be a number in [0, 1]; got {t!r}"
        return None


@dataclass
class ReliabilityBin(Record):
    lower: float
    upper: float
    texts: int
    confidence: float
    accuracy: float


@dataclass
class CalibrationFigures(Record):
    """How well one set of probabilities keeps its promise on labelled texts."""

    texts: int
    accuracy: float
    mean_confidence: float
    ece: float  # equal-mass bins
    ece_width: float  # equal-width bins
    brier: float
    log_loss: float
    aurc: float
    accuracy_at: dict[str, float]  # coverage ("0.8", "0.9", "0.95") -> accuracy on the most confident share


@dataclass
class ArtifactMeta:
    """Base of the metadata schemas: `FILE` inside the artifact folder, `KIND` for error messages."""

    FILE: ClassVar[str]
    KIND: ClassVar[str]
    NOT_FOUND_HINT: ClassVar[str] = ""
    # Nested records with their own types: field -> parse(value) (ValueError when malformed); they write
    # themselves with `to_json()`.
    NESTED: ClassVar[dict[str, Callable[[Any], Any]]] = {}

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
        missing = [k for k in required_fields(cls) if k not in data]
        if missing:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata (missing {', '.join(missing)})")
        values = known_fields(cls, data)
        try:
            optional = {f.name for f in fields(cls) if f.default is None}  # a record left out is None
            special = {name: values.pop(name) for name in cls.NESTED if name in values}
            values = typed_values(cls, values)
            for name, value in special.items():
                values[name] = None if value is None and name in optional else cls.NESTED[name](value)
        except (TypeError, ValueError) as err:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata ({err})") from None
        meta = cls(**values)
        problem = meta.problem()
        if problem:
            raise ArtifactError(f"{where}: unreadable {cls.KIND} metadata ({problem})")
        return meta

    @classmethod
    def typed(cls, values: dict):
        """The schema from values built as plain JSON by its writer (its records read into their types)."""
        return cls(**typed_values(cls, values))

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
        from senti.core.untrusted import parse_json

        return cls.from_json(parse_json(raw, where, f"{cls.KIND} metadata"), where)

    def to_json(self) -> dict:
        return {f.name: to_plain(getattr(self, f.name)) for f in fields(self)}

    def write(self, folder: Path) -> None:
        self.write_to(Path(folder) / self.FILE)

    def write_to(self, path: Path) -> None:
        """Written at `path` (a schema whose file name carries a split: eval_<split>.json), atomically."""
        write_json_atomic(path, self.to_json())


@dataclass
class SplitRecipe(Record):
    """How a model's train/dev/test splits were cut, so eval and export cut the very same ones."""

    dataset: str
    seed: int
    text_column: str | None = None
    label_column: str | None = None
    # A hash of the rows (texts and labels, in order) whatever the path: `--replay` finds a parent's data by it.
    fingerprint: str | None = None
    # The label set when a continued parent gave it (then the train split may hold only one of them); else the
    # train split's labels.
    labels: list[str] | None = None
    # A review of senti audit's suspects applied to the rows (toolkit.data.review): its path, as the run read it.
    reviewed: str | None = None

    @classmethod
    def from_json(cls, data) -> SplitRecipe:
        """The recipe as senti.json and export.json hold it (`data`); ValueError when it is not one."""
        if not isinstance(data, dict) or "dataset" not in data or "seed" not in data:
            raise ValueError("data must record dataset and seed")
        return cls(**known_fields(cls, data))

    def to_json(self) -> dict:
        return asdict(self)


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

    NESTED: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "tokenizer": TokenizerSettings.from_export_json,
        "formats": lambda formats: {name: FormatRecord.from_json(entry) for name, entry in _mapping(formats).items()},
    }

    labels: list[str]
    max_seq_len: int
    tokenizer: TokenizerSettings
    formats: dict[str, FormatRecord]
    model: ModelShape
    meta_version: int = layout.META_VERSION
    written_by: str = "senti export"
    source_checkpoint: str | None = None
    data: SplitRecipe | None = None  # how the parity texts' splits were cut
    io: GraphIO | None = None
    spec: ExportSpec = field(default_factory=ExportSpec)
    parity_texts: int = 0
    reference_accuracy: float | None = None
    triton: str | None = None
    versions: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None
    parity_sample: ParitySample | None = None
    # Drift figures of the parity (dev) texts, to compare traffic with.
    reference_stats: DriftFigures | None = None
    # How the logits become probabilities (None: the plain softmax), and the threshold below which answers are unsure.
    calibration: Calibration | None = None
    abstain: Abstention | None = None

    def problem(self) -> str | None:
        if problem := labels_problem(self.labels, self.max_seq_len):
            return problem
        if len(set(self.labels)) != len(self.labels) or len(self.labels) < 2:
            return f"labels must be two or more distinct names; got {self.labels}"
        return scores_problem(self.calibration, self.abstain, len(self.labels))


def scores_problem(calibration: Calibration | None, abstain: Abstention | None, classes: int) -> str | None:
    """What is wrong with a metadata file's calibration and abstention records, or None."""
    if calibration is not None and (problem := calibration.problem(classes)):
        return problem
    return abstain.problem() if abstain is not None else None


def _mapping(value) -> dict:
    if not isinstance(value, dict):
        raise ValueError("formats must map each format to its files and parity record")
    return value


