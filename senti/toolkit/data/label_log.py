"""Reading a label log of `senti label` (JSONL, one line per answer, the last per id wins) as training rows:
`senti train --dataset LABELS` and `senti select --exclude-labelled` read it here; the surge wing writes it."""

from __future__ import annotations

from pathlib import Path

from senti.core.errors import DataError
from senti.core.rows import parse_json_line

UNLABELLED = ("skip", "undo")  # answers after which a text counts as not labelled
ASPECT_ANSWER = "aspects"  # `senti label --aspects`: the line's `aspects` holds a polarity per aspect found
LOG_KEYS = ("id", "text", "label", "answer")  # what makes a JSONL file a label log


def log_record(line: str, where: str) -> dict:
    """One line of a label log as its record, or DataError naming `where` (FILE:LINE) and what is wrong: the
    one check for the log's reader here and for `senti label` replaying its own log."""
    record, error = parse_json_line(line)
    if record is None or not all(k in record for k in LOG_KEYS):
        raise DataError(f"{where}: not a label log line ({error or 'needs ' + ', '.join(LOG_KEYS)})")
    return record


def is_label_log(path: Path) -> bool:
    """Whether `path` is a label log of `senti label` (its first line has the log's keys)."""
    path = Path(path)
    if path.suffix.lower() != ".jsonl" or not path.is_file():
        return False
    with path.open("rb") as fh:
        record, _ = parse_json_line(fh.readline().decode("utf-8", errors="replace"))
    return record is not None and all(k in record for k in LOG_KEYS)


def last_answers(path: Path) -> tuple[dict[str, tuple[dict, int]], int]:
    """({id: (its last record, its line)}, lines read); a half-written last line is not read."""
    last: dict[str, tuple[dict, int]] = {}
    lines = 0
    with Path(path).open(encoding="utf-8", errors="surrogateescape") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if not line.endswith("\n"):  # a half-written last line: the answer in flight when the server died
                break
            lines += 1
            record = log_record(line, f"{path}:{n}")
            last[str(record["id"])] = (record, n)
    return last, lines


def resolve_log(path: Path) -> tuple[list[tuple[str, str, str]], dict]:
    """(text, label, where) of each id's last answer, skipped, undone and aspect answers (`resolve_aspect_log`)
    left out, plus counts."""
    last, lines = last_answers(path)
    rows = [(r["text"], str(r["label"]), f"{path}:{n}") for r, n in last.values()
            if r["answer"] not in (*UNLABELLED, ASPECT_ANSWER)]
    return rows, {"lines": lines, "texts": len(last), "labelled": len(rows),
                  "skipped": sum(r["answer"] == "skip" for r, _ in last.values()),
                  "undone": sum(r["answer"] == "undo" for r, _ in last.values()),
                  "aspect_answers": sum(r["answer"] == ASPECT_ANSWER for r, _ in last.values())}


def resolve_aspect_log(path: Path) -> list[tuple[str, dict[str, str], str]]:
    """(text, {aspect: polarity}, where) of each id whose last answer labels aspects (`senti label --aspects`)."""
    last, _ = last_answers(path)
    rows = []
    for r, n in last.values():
        if r["answer"] == ASPECT_ANSWER:
            if not isinstance(r.get("aspects"), dict):
                raise DataError(f"{path}:{n}: an aspect answer without an \"aspects\" object")
            rows.append((r["text"], {str(k): str(v) for k, v in r["aspects"].items()}, f"{path}:{n}"))
    return rows


def labelled_texts(path: Path) -> set[str]:
    """Texts (stripped) with a final label in a label log, for `senti select --exclude-labelled`."""
    return {text.strip() for text, _, _ in resolve_log(path)[0]}
