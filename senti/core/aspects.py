"""A team's aspect list (which parts of a product reviews talk about), read as untrusted input.

The file is JSON: `{"aspects": [{"name": "service_waiters_attitude", "label": "服务人员态度", "keywords": ["服务员",
"态度"]}, ...]}`, a `name` of letters, digits, `_` and `-`, an optional display `label`, and the `keywords` whose
presence in a clause means the aspect is mentioned there. Every aspect answer is one of ASPECT_POLARITIES. The
reader bounds the file, the number of aspects and keywords and their lengths, and refuses a bad entry in one line
that names the file and the entry.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from senti.core.errors import DataError
from senti.core.untrusted import parse_json

ASPECT_POLARITIES = ("positive", "neutral", "negative", "not_mentioned")
MAX_ASPECT_FILE_BYTES = 1 << 20
MAX_ASPECTS = 256  # a team's list is tens; every aspect is looked for in every clause of every text
MAX_KEYWORDS = 200
MAX_KEYWORD_CHARS = 32
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True)
class Aspect:
    name: str
    keywords: tuple[str, ...]
    label: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "label": self.label, "keywords": list(self.keywords)}


def read_aspects(path: Path) -> list[Aspect]:
    """The aspect list in the JSON file at `path` (see the module's docstring)."""
    try:
        with Path(path).open("rb") as fh:
            raw = fh.read(MAX_ASPECT_FILE_BYTES + 1)
    except OSError as err:
        raise DataError(f"{path}: cannot read the aspect file ({err.strerror or err})") from None
    if len(raw) > MAX_ASPECT_FILE_BYTES:
        raise DataError(f"{path}: the aspect file is larger than {MAX_ASPECT_FILE_BYTES >> 20} MB")
    return parse_aspects(parse_json(raw, path, "aspect file"), str(path))


def parse_aspects(data, where: str) -> list[Aspect]:
    """The aspect list in `data` (the file's parsed JSON, or a request body's `aspects`); DataError names `where`
    and the entry at fault."""
    entries = data.get("aspects") if isinstance(data, dict) else data
    if not isinstance(entries, list) or not entries:
        raise DataError(f"{where}: expected {{\"aspects\": [...]}} with at least one aspect")
    if len(entries) > MAX_ASPECTS:
        raise DataError(f"{where}: {len(entries)} aspects; at most {MAX_ASPECTS}")
    aspects = [_aspect(entry, f"{where}: aspect {i + 1}") for i, entry in enumerate(entries)]
    seen: set[str] = set()
    for a in aspects:
        if a.name in seen:
            raise DataError(f"{where}: aspect name {a.name!r} appears twice")
        seen.add(a.name)
    return aspects


def _aspect(entry, where: str) -> Aspect:
    if not isinstance(entry, dict):
        raise DataError(f"{where}: expected an object with name and keywords")
    name, label, keywords = entry.get("name"), entry.get("label", ""), entry.get("keywords")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise DataError(f"{where}: name {name!r} must be 1-64 letters, digits, '_' or '-'")
    if not isinstance(label, str) or len(label) > 64:
        raise DataError(f"{where} ({name}): label must be text of at most 64 characters")
    if not isinstance(keywords, list) or not keywords or len(keywords) > MAX_KEYWORDS:
        raise DataError(f"{where} ({name}): keywords must be a list of 1 to {MAX_KEYWORDS} words")
    cleaned = []
    for word in keywords:
        if not isinstance(word, str) or not word.strip() or len(word.strip()) > MAX_KEYWORD_CHARS:
            raise DataError(f"{where} ({name}): keyword {word!r} must be non-empty text of at most "
                            f"{MAX_KEYWORD_CHARS} characters")
        cleaned.append(word.strip())
    return Aspect(name=name, keywords=tuple(dict.fromkeys(cleaned)), label=label)


# A model with aspect heads (`senti train --aspects`) answers one group of ASPECT_POLARITIES per aspect; its labels
# name each output "aspect/polarity", aspect by aspect, so the label list alone says that a checkpoint or an export
# has heads and which aspects they answer.
HEAD_SEPARATOR = "/"


def head_labels(names: list[str]) -> list[str]:
    """The labels of a model with a head per aspect of `names`, in output order."""
    return [f"{name}{HEAD_SEPARATOR}{polarity}" for name in names for polarity in ASPECT_POLARITIES]


def head_aspects(labels: list[str]) -> list[str] | None:
    """The aspect names of a model whose `labels` are aspect heads' (`head_labels`), else None."""
    if not labels or len(labels) % len(ASPECT_POLARITIES):
        return None
    names = [label.rsplit(HEAD_SEPARATOR, 1)[0] for label in labels[::len(ASPECT_POLARITIES)]]
    return names if head_labels(names) == list(labels) and all(NAME.fullmatch(n) for n in names) else None
