"""Reading a label log of `senti label` (JSONL, one line per answer) as training rows: `senti train --dataset LABELS`
and `senti select --exclude-labelled` read it here; the surge wing writes it.

Each labeller's last answer per id counts (a line's `by` names the labeller; lines without one are one labeller).
A text labelled alike by everyone who labelled it trains with that label; labelled differently, it trains only once
someone settled it (`settle`, senti label --review disagreements), and is left out and counted until then."""

from __future__ import annotations

from pathlib import Path

from senti.core.errors import DataError
from senti.core.rows import parse_json_line

UNLABELLED = ("skip", "undo")  # answers after which a text counts as not labelled
ASPECT_ANSWER = "aspects"  # `senti label --aspects`: the line's `aspects` holds a polarity per aspect found
LOG_KEYS = ("id", "text", "label", "answer")  # what makes a JSONL file a label log


LOG_VERSION = 1  # each line's `log_version` (absent: 1); a line of a later version is refused, not misread


def log_record(line: str, where: str) -> dict:
    """One line of a label log as its record, or DataError naming `where` (FILE:LINE) and what is wrong: the
    one check for the log's reader here and for `senti label` replaying its own log."""
    record, error = parse_json_line(line)
    if record is None or not all(k in record for k in LOG_KEYS):
        raise DataError(f"{where}: not a label log line ({error or 'needs ' + ', '.join(LOG_KEYS)})")
    version = record.get("log_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version > LOG_VERSION or version < 1:
        raise DataError(f"{where}: a label log line of version {version!r}, written by a newer senti (this one "
                        f"reads version {LOG_VERSION}); read it with that senti or upgrade")
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
    for record, n in log_lines(path):
        lines += 1
        last[str(record["id"])] = (record, n)
    return last, lines


def log_lines(path: Path):
    """(record, line number) of every whole line of a label log."""
    with Path(path).open(encoding="utf-8", errors="surrogateescape") as fh:
        for n, line in enumerate(fh, 1):
            if not line.strip():
                continue
            if not line.endswith("\n"):  # a half-written last line: the answer in flight when the server died
                break
            yield log_record(line, f"{path}:{n}"), n


SETTLE = "settle"  # a third labeller's label for a text two labellers labelled differently


def labeller_answers(path: Path) -> dict[str, dict[str, tuple[dict, int]]]:
    """{id: {labeller: (their last record, its line)}}; an undo takes back that labeller's answer."""
    return by_labeller(log_lines(path))


def by_labeller(lines) -> dict[str, dict[str, tuple[dict, int]]]:
    """`labeller_answers` of (record, line number) pairs already read."""
    answers: dict[str, dict[str, tuple[dict, int]]] = {}
    for record, n in lines:
        got = answers.setdefault(str(record["id"]), {})
        who = str(record.get("by") or "")
        if record["answer"] == "undo":
            got.pop(who, None)
        else:
            got[who] = (record, n)
    return answers


def final_answer(got: dict[str, tuple[dict, int]]) -> tuple[dict | None, int | None, bool]:
    """(the record that decides a text's label, its line, whether its labellers disagree): the settled answer when
    there is one; else the labellers' answer when they agree (the latest of them); None when they disagree."""
    settled = [(r, n) for r, n in got.values() if r["answer"] == SETTLE]
    if settled:
        record, n = max(settled, key=lambda item: item[1])
        return record, n, True
    said = [(r, n) for r, n in got.values() if r["answer"] not in UNLABELLED]
    if not said:
        latest = max(got.values(), key=lambda item: item[1]) if got else (None, None)
        return latest[0], latest[1], False
    labels = {str(r.get("label")) for r, _ in said if r["answer"] != ASPECT_ANSWER}
    if len(labels) > 1:
        return None, None, True
    record, n = max(said, key=lambda item: item[1])
    return record, n, False


def resolve_log(path: Path) -> tuple[list[tuple[str, str, str]], dict]:
    """(text, label, where) of each text's final label (`final_answer`), skipped, undone, unsettled and aspect
    answers (`resolve_aspect_log`) left out, plus counts."""
    lines = list(log_lines(path))  # read once: the answers and the count of lines
    answers = by_labeller(lines)
    rows, counts = [], {"skipped": 0, "undone": 0, "aspect_answers": 0, "disagreed": 0, "settled": 0}
    for got in answers.values():
        record, n, split = final_answer(got)
        if record is None:
            counts["disagreed" if split else "undone"] += 1
            continue
        counts["settled"] += split
        if record["answer"] in UNLABELLED:
            counts["skipped"] += 1
        elif record["answer"] == ASPECT_ANSWER:
            counts["aspect_answers"] += 1
        else:
            rows.append((record["text"], str(record["label"]), f"{path}:{n}"))
    return rows, {"lines": len(lines), "texts": len(answers), "labelled": len(rows), **counts}


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
