"""A review of `senti audit`'s suspects (`senti label --review`), read back as decisions on the dataset's rows.

The review log is a label log (JSONL, the last line per id wins) whose ids are the suspects' places, FILE:LINE, and
whose answers are `keep` (the given label stands), `change` (the `label` the reviewer chose) or `drop` (the row is
left out of training); `skip` and `undo` decide nothing. `apply_review` applies the decisions to the splits a
dataset is cut into, so every row keeps its split and a training run, its evaluation and its export read the same
reviewed rows (`SplitRecipe.reviewed`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from senti.core.errors import DataError
from senti.toolkit.data.label_log import last_answers

REVIEW_ANSWERS = ("keep", "change", "drop")


@dataclass(frozen=True)
class Decision:
    answer: str  # keep, change or drop
    label: str | None  # the label the row trains with (None: dropped)
    text: str
    where: str  # the review log's FILE:LINE of this decision


@dataclass(frozen=True)
class ReviewCounts:
    kept: int
    changed: int
    dropped: int

    def said(self, path) -> str:
        return f"reviewed in {path}: {self.kept} kept, {self.changed} relabelled, {self.dropped} dropped"


def row_key(where: str) -> tuple[str, int] | None:
    """(the absolute file, the line) of a FILE:LINE place, or None when it names no file line."""
    file, _, line = str(where).rpartition(":")
    if not file or not line.isdigit():
        return None
    return str(Path(file).expanduser().resolve()), int(line)


def read_decisions(path: Path) -> dict[tuple[str, int], Decision]:
    """Each reviewed row's last decision, keyed by its file and line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"--reviewed {path}: no such file")
    last, _ = last_answers(path)
    decisions: dict[tuple[str, int], Decision] = {}
    for record, n in last.values():
        if record["answer"] not in REVIEW_ANSWERS:
            continue
        given = record.get("input")
        source: dict = given if isinstance(given, dict) else {}
        key = ((str(source["file"]), int(source["line"])) if isinstance(source.get("file"), str)
               and isinstance(source.get("line"), int) else row_key(str(record["id"])))
        if key is None:
            raise DataError(f"{path}:{n}: id {record['id']!r} names no FILE:LINE; not a review of senti audit's "
                            "suspects")
        label = None if record["answer"] == "drop" else str(record["label"])
        decisions[key] = Decision(record["answer"], label, str(record["text"]), f"{path}:{n}")
    return decisions


def apply_review(splits, path: Path):
    """`splits` (toolkit.data.splits.Splits) with the review's decisions applied: dropped rows left out, relabelled
    rows given their new label; DataError for a decision about a row the dataset does not hold as reviewed."""
    decisions = read_decisions(path)
    used: set[tuple[str, int]] = set()
    counts = {"keep": 0, "change": 0, "drop": 0}
    parts = {}
    for name in ("train", "dev", "test"):
        kept = []
        for example in splits.split(name):
            key = row_key(example.where)
            decision = decisions.get(key) if key is not None else None
            if decision is None:
                kept.append(example)
                continue
            if decision.text.strip() != example.text:
                raise DataError(f"{decision.where}: {example.where} holds another text than the one reviewed (the "
                                "review was made of another version of the data)")
            if decision.label is not None and decision.label not in splits.labels:
                raise DataError(f"{decision.where}: label {decision.label!r} is not one of {splits.labels}")
            used.add(key)  # type: ignore[arg-type]
            counts[decision.answer] += 1
            if decision.label is not None:
                kept.append(replace(example, label=decision.label))
        parts[name] = kept
    unused = [d.where for k, d in decisions.items() if k not in used]
    if unused:
        raise DataError(f"{unused[0]}: a decision about a row this dataset does not hold ({len(unused)} such); was "
                        "the review made of another dataset?")
    return replace(splits, train=parts["train"], dev=parts["dev"], test=parts["test"],
                   reviewed=ReviewCounts(counts["keep"], counts["change"], counts["drop"]))
