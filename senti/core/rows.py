"""The one reader of the row formats senti takes: .txt (a text a line), .tsv, .csv (with a header), .jsonl.

Training reads strictly (the first bad row raises `DataError` naming file and line; blank lines are
skipped); `senti predict` reads leniently (a bad row becomes an error `Row` with its line, so the
output keeps one row per input row). Both read lazily, decode UTF-8 with a BOM stripped, and pick
columns by the same rules; `senti predict --engine ray` reads its JSONL and CSV files with `read_rows` too
(serving/ray_rows.py).
"""

from __future__ import annotations

import contextlib
import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from senti.core.errors import DataError

# tried in order when none is named (reviewbody: ASAP's aspect data)
TEXT_COLUMNS = ("text_a", "text", "review", "sentence", "content", "reviewbody")
LABEL_COLUMNS = ("label", "labels", "sentiment")


@dataclass(frozen=True)
class RowFormat:
    """What senti does with files of one suffix: `rows`, read row by row here (train, eval, predict, select,
    pretrain); `labels`, carries a label column; `output`, written by senti predict and select; `ray`, read by
    senti predict --engine ray (Ray Data's readers); `ray_output`, written by it (a folder of part files)."""

    rows: bool = False
    labels: bool = False
    output: bool = False
    ray: bool = False
    ray_output: bool = False


# The one table of row-file suffixes; every list of suffixes below and in the serving floor is read from it.
# Order matters where a folder is searched (train.tsv before train.csv) and in messages.
ROW_FORMATS = {
    ".parquet": RowFormat(ray=True, ray_output=True),
    ".tsv": RowFormat(rows=True, labels=True, output=True),
    ".csv": RowFormat(rows=True, labels=True, output=True, ray=True),
    ".jsonl": RowFormat(rows=True, labels=True, output=True, ray=True, ray_output=True),
    ".txt": RowFormat(rows=True),  # one text a line: no label column
    ".json": RowFormat(ray=True),  # JSON lines under Ray's usual suffix
}


def suffixes(what: str) -> tuple[str, ...]:
    """The suffixes whose RowFormat has `what` (rows, labels, output, ray, ray_output), in the table's order."""
    return tuple(suffix for suffix, fmt in ROW_FORMATS.items() if getattr(fmt, what))


INPUT_SUFFIXES = suffixes("rows")
LABELLED_SUFFIXES = suffixes("labels")


@dataclass
class Row:
    line: int  # 1-based line where the row starts
    text: str | None
    error: str | None = None
    label: object = None  # the raw label value, when labels were asked for
    record: dict | None = None  # every column of the row (ids and all), to write back beside new columns


def pick_column(columns, wanted: str | None, choices, path: Path, role: str = "text") -> str:
    """`wanted` if the header has it, else the first of `choices` that it has; DataError otherwise."""
    if wanted is not None:
        if wanted not in columns:
            raise DataError(f"{path}:1: no {role} column '{wanted}' (columns: {', '.join(columns)})")
        return wanted
    for name in choices:
        if name in columns:
            return name
    raise DataError(f"{path}:1: no {role} column; expected one of {', '.join(choices)} "
                    f"(columns: {', '.join(columns)}); name it with --{role}-column")


def parse_json_line(line: str) -> tuple[dict | None, str | None]:
    """(object, None) for a JSON object line, else (None, why not)."""
    from senti.core.untrusted import MAX_JSON_DEPTH, TooDeep, loads_bounded

    try:
        record = loads_bounded(line)
    except json.JSONDecodeError as err:
        return None, f"invalid JSON ({err.msg})"
    except TooDeep:  # a line of thousands of "[" was a RecursionError traceback, before
        return None, f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
    if not isinstance(record, dict):
        return None, f"expected a JSON object, found {type(record).__name__}"
    return record, None


def _decoded_lines(path: Path, progress: Callable[[int], None] | None, stream=None) -> Iterator[str]:
    # surrogateescape keeps undecodable bytes visible (as lone surrogates) so the row can be flagged.
    with (path.open("rb") if stream is None else contextlib.nullcontext(stream)) as fh:
        for n, raw in enumerate(fh):
            if progress:
                progress(len(raw))
            if n == 0 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 BOM, as Windows editors write
                raw = raw[3:]
            yield raw.decode("utf-8", errors="surrogateescape").rstrip("\r\n")


def _bad_utf8(text: str) -> bool:
    # Undecodable bytes (kept by surrogateescape) and lone surrogates written as JSON escapes ("\ud800").
    return any("\ud800" <= ch <= "\udfff" for ch in text)


def read_rows(path: Path, text_column: str | None = None, *, label_column: str | None = None,
              with_labels: bool = False, strict: bool = False, progress=None, stream=None,
              kind: str | None = None) -> Iterator[Row]:
    """Rows of a .txt, .tsv/.csv (with header) or .jsonl file, lazily.

    `with_labels` also resolves a label column (named, or one of LABEL_COLUMNS). `strict` raises
    DataError at the first bad row and skips blank lines; otherwise bad rows come back with `error` set.
    `stream` (a binary file object, such as standard input) is read instead of `path`, as `kind` (a suffix).
    """
    path = Path(path)
    suffix = (kind or path.suffix).lower()
    allowed = LABELLED_SUFFIXES if with_labels else INPUT_SUFFIXES
    if suffix not in allowed:
        raise DataError(f"{path}: unsupported file type '{suffix}'; use one of {', '.join(allowed)}")
    lines = _decoded_lines(path, progress, stream)
    if suffix == ".txt":
        rows = (Row(n, None, "not valid UTF-8") if _bad_utf8(line) else Row(n, line, record={"text": line})
                for n, line in enumerate(lines, 1))
    elif suffix == ".jsonl":
        rows = _jsonl_rows(path, lines, text_column, label_column, with_labels)
    else:
        rows = _table_rows(path, lines, "\t" if suffix == ".tsv" else ",", text_column, label_column, with_labels,
                           strict)
    if not strict:
        yield from rows
        return
    for row in rows:
        if row.error == "empty line":
            continue
        if row.error:
            raise DataError(f"{path}:{row.line}: {row.error}")
        yield row


def _jsonl_rows(path, lines, text_column, label_column, with_labels):
    text_col = label_col = None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            yield Row(n, None, "empty line")
            continue
        if _bad_utf8(line):
            yield Row(n, None, "not valid UTF-8")
            continue
        record, error = parse_json_line(line)
        if record is None:
            yield Row(n, None, error)
            continue
        if text_col is None:
            text_col = pick_column(list(record), text_column, TEXT_COLUMNS, path, "text")
            if with_labels:
                label_col = pick_column(list(record), label_column, LABEL_COLUMNS, path, "label")
        text = record.get(text_col)
        if text is None:
            yield Row(n, None, f"missing '{text_col}'")
        elif not isinstance(text, str):
            yield Row(n, None, f"'{text_col}' must be a string, found {type(text).__name__}")
        elif with_labels and record.get(label_col) is None:
            yield Row(n, None, f"missing '{label_col}'")
        else:
            yield Row(n, text, label=record.get(label_col) if with_labels else None, record=record)


def _table_rows(path, lines, delimiter, text_column, label_column, with_labels, strict):
    if delimiter == "\t":  # TSV as ChnSentiCorp writes it: no quoting, the last column keeps extra tabs
        header = next(lines, None)
        records = ((n, line.split("\t")) for n, line in enumerate(lines, 2))
    else:
        counter = {"line": 0}

        def counted():
            for line in lines:
                counter["line"] += 1
                yield line + "\n"  # the line's end back: a quoted field that spans lines keeps its newline

        reader = csv.reader(counted())
        try:
            header = next(reader, None)
        except csv.Error as err:  # a stray carriage return before the header, say
            raise DataError(f"{path}: line 1: unreadable CSV header ({err})") from None
        records = _csv_records(reader, counter)
    if header is None or header == [] or header == "":
        if strict:
            raise DataError(f"{path}: empty file (expected a header line)")
        return
    columns = [h.strip() for h in (header.split("\t") if isinstance(header, str) else header)]
    text_index = columns.index(pick_column(columns, text_column, TEXT_COLUMNS, path, "text"))
    label_index = columns.index(pick_column(columns, label_column, LABEL_COLUMNS, path, "label")) \
        if with_labels else None
    width = len(columns)
    for n, fields in records:
        if isinstance(fields, str):  # a CSV record the csv module could not parse
            yield Row(n, None, fields)
            continue
        if not any(f.strip() for f in fields):
            yield Row(n, None, "empty line")
            continue
        if delimiter == "\t" and len(fields) > width:
            if text_index != width - 1:  # a tab in a text that is not the last column: where does it end?
                yield Row(n, None, f"{len(fields)} fields but the header has {width}: a tab inside "
                                   f"'{columns[text_index]}' cannot be told from a column break unless the text "
                                   "is the last column")
                continue
            fields = fields[: width - 1] + ["\t".join(fields[width - 1 :])]
        if len(fields) < width:
            yield Row(n, None, f"expected {width} columns ({', '.join(columns)}), found {len(fields)}")
            continue
        text = fields[text_index]
        if _bad_utf8(text) or (label_index is not None and _bad_utf8(fields[label_index])):
            yield Row(n, None, "not valid UTF-8")
            continue
        yield Row(n, text, label=fields[label_index] if label_index is not None else None,
                  record=dict(zip(columns, fields)))


def _csv_records(reader, counter):
    start = counter["line"] + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            yield start, f"unreadable CSV ({err})"
            start = counter["line"] + 1
            continue
        yield start, fields
        start = counter["line"] + 1
