"""Reading folders a user hands over (export folders, checkpoints, PaddleNLP model folders) as untrusted input.

Every file is read from inside its folder only (no absolute path or symbolic link may lead out of it), only regular
files of bounded size are read, JSON of bounded depth is parsed, and a model config's numbers are checked against
ranges before anything is built from them: a `num_hidden_layers` of a million grew memory without limit, a
`vocab.txt` linked to /etc/passwd was read. Every refusal is one line naming the file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from senti.core.errors import ArtifactError
from senti.core.ngram_head import MAX_CLASS_OFFSET, WEIGHT_GRID

MAX_CONFIG_BYTES = 1 << 20  # a model config is a few kB
MAX_JSON_DEPTH = 32  # senti's and PaddleNLP's files nest three or four levels

# A model config's numbers and the range each may take: past ERNIE 3.0 xbase and BERT-large with room to spare.
CONFIG_RANGES = {
    "num_hidden_layers": (1, 64),
    "hidden_size": (1, 8192),
    "num_attention_heads": (1, 128),
    "intermediate_size": (1, 32768),
    "vocab_size": (1, 2_000_000),  # ngram_head's exact keys assume fewer than two million tokens
    "max_position_embeddings": (1, 16384),
    "type_vocab_size": (1, 64),
    "task_type_vocab_size": (1, 64),
    "num_labels": (1, 10_000),
    "ngram_buckets": (0, 20_000_003),
    "pad_token_id": (0, 2_000_000),
}
MAX_PARAMETERS = 2_000_000_000  # 8 GB of float32: more is not a model senti can train or serve on a CPU
# A config's other numbers and names: a dropout of 2.0 or an unknown activation gave a 70-line traceback, an n-gram
# weight of NaN answered "negative" to everything.
PROBABILITIES = ("hidden_dropout_prob", "attention_probs_dropout_prob")
ACTIVATIONS = ("gelu", "relu", "tanh", "sigmoid", "silu", "swish", "elu", "leaky_relu")  # paddle.nn.functional's
NGRAM_WEIGHT_RANGE = (0.0, max(WEIGHT_GRID))  # what training chooses from (core.ngram_head)


def inside(folder: Path, relative, what: str, kind: str = "export folder") -> Path:
    """`folder / relative`, refused unless it is a regular file (or folder, for Paddle's) inside the folder once
    every symbolic link is followed."""
    root = Path(folder).resolve()
    if not isinstance(relative, str) or not relative or Path(relative).is_absolute():
        raise ArtifactError(f"{folder}: {what} {relative!r} must be a path inside the {kind}")
    path = (root / relative).resolve()
    if path != root and root not in path.parents:
        raise ArtifactError(f"{folder}: {what} {relative!r} leads outside the {kind}")
    if not path.exists():
        raise ArtifactError(f"{folder}: {what} {relative} is missing")
    if not (path.is_file() or path.is_dir()):
        raise ArtifactError(f"{folder}: {what} {relative} is not a regular file")
    return path


def read_bounded(path: Path, limit: int, what: str, writer: str = "senti export") -> bytes:
    with Path(path).open("rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ArtifactError(f"{path}: {what} is larger than {limit >> 20} MB; not a file {writer} wrote")
    return data


class TooDeep(ValueError):
    """JSON nested deeper than MAX_JSON_DEPTH."""


def _nested_deeper(value, limit: int) -> bool:
    """Whether parsed JSON nests deeper than `limit` (iteratively: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return False


def loads_bounded(text: str) -> object:
    """`json.loads` whose nesting is bounded by MAX_JSON_DEPTH: raises TooDeep past it (Python's parser would
    recurse out on thousands of "[" before that), json.JSONDecodeError for what is not JSON."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise TooDeep from None
    if _nested_deeper(data, MAX_JSON_DEPTH):
        raise TooDeep
    return data


def parse_json(raw: bytes, where, what: str = "JSON") -> object:
    """JSON from bytes, refused in one line (`WHERE: unreadable WHAT (why)`) when it is not UTF-8, not JSON, or
    nested deeper than MAX_JSON_DEPTH."""
    def refuse(why: str) -> ArtifactError:
        return ArtifactError(f"{where}: unreadable {what} ({why})")

    try:
        return loads_bounded(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise refuse(f"not UTF-8 text, byte {err.start}") from None
    except TooDeep:
        raise refuse(f"nested too deeply, over {MAX_JSON_DEPTH} levels") from None
    except json.JSONDecodeError as err:
        raise refuse(f"not JSON: {err.msg} at line {err.lineno}") from None


def read_json_file(folder: Path, name: str, what: str, kind: str) -> object:
    """A JSON file of `folder`, read as untrusted input (inside the folder, bounded, bounded depth)."""
    path = inside(folder, name, what, kind)
    return parse_json(read_bounded(path, MAX_CONFIG_BYTES, what, "senti or PaddleNLP"), path, what.removeprefix("the "))


def check_offsets(offsets, num_labels, where) -> None:
    """`class_offsets` (core.ngram_head's logit adjustment), when present: one finite number per label."""
    if offsets is None:
        return
    numbers = isinstance(offsets, list) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and abs(x) <= MAX_CLASS_OFFSET
        for x in offsets)
    if not numbers or (isinstance(num_labels, int) and len(offsets) != num_labels):
        raise ArtifactError(f"{where}: class_offsets must be a list of one finite number (within "
                            f"+-{MAX_CLASS_OFFSET:g}) per label")


def _number_in(value, low: float, high: float, closed_high: bool = True) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and \
        low <= value and (value <= high if closed_high else value < high)


def _check_other_settings(data: dict, where) -> None:
    """Dropouts in [0, 1), an activation Paddle has, a padding id inside the vocabulary, a finite n-gram weight."""
    for key in PROBABILITIES:
        if data.get(key) is not None and not _number_in(data[key], 0.0, 1.0, closed_high=False):
            raise ArtifactError(f"{where}: {key} {data[key]!r} is not a probability in [0, 1)")
    act = data.get("hidden_act")
    if act is not None and act not in ACTIVATIONS:
        raise ArtifactError(f"{where}: hidden_act {act!r} is not one of {', '.join(ACTIVATIONS)}")
    pad, vocab = data.get("pad_token_id"), data.get("vocab_size")
    if isinstance(pad, int) and isinstance(vocab, int) and pad >= vocab:
        raise ArtifactError(f"{where}: pad_token_id {pad} is outside the vocabulary of {vocab:,}")
    weight, (low, high) = data.get("ngram_weight"), NGRAM_WEIGHT_RANGE
    if weight is not None and not _number_in(weight, low, high):
        raise ArtifactError(f"{where}: ngram_weight {weight!r} is not a number in [{low:g}, {high:g}]")


def check_model_config(data: dict, where) -> None:
    """Refuse, in one line, a model config whose numbers are not whole numbers in CONFIG_RANGES or would make a
    model of more than MAX_PARAMETERS parameters: checked before anything is built from it."""
    for key, (low, high) in CONFIG_RANGES.items():
        if key not in data or data[key] is None:
            continue
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ArtifactError(f"{where}: {key} {value!r} is not a whole number in [{low:,}, {high:,}]")
    labels = data.get("num_labels")
    if not isinstance(labels, int) and isinstance(data.get("id2label"), dict):
        labels = len(data["id2label"])
    check_offsets(data.get("class_offsets"), labels, where)
    _check_other_settings(data, where)
    hidden, heads = data.get("hidden_size"), data.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and hidden % heads:
        raise ArtifactError(f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads}")
    h, layers = data.get("hidden_size") or 0, data.get("num_hidden_layers") or 0
    ffn = data.get("intermediate_size") or 4 * h
    parameters = ((data.get("vocab_size") or 0) + (data.get("max_position_embeddings") or 0)) * h + \
        layers * (4 * h * h + 2 * h * ffn) + (data.get("ngram_buckets") or 0) * (data.get("num_labels") or 2)
    if parameters > MAX_PARAMETERS:
        raise ArtifactError(f"{where}: a model of {parameters:,} parameters (over {MAX_PARAMETERS:,}); not one senti "
                            "can train or serve on a CPU")
