"""Score files row by row in bounded memory: exactly one output row per input row, in order.

Rows that cannot be read (bad UTF-8, bad JSON, no text) become error rows with their line
numbers; nothing is dropped. The output appears under its name only when complete.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from serving.errors import DataError

TEXT_COLUMNS = ("text_a", "text", "review", "sentence", "content")  # tried in order when none is named
INPUT_SUFFIXES = (".txt", ".tsv", ".csv", ".jsonl")
OUTPUT_SUFFIXES = (".jsonl", ".tsv", ".csv")


@dataclass
class Row:
    line: int  # 1-based line where the row starts
    text: str | None
    error: str | None = None


def _decoded_lines(path: Path, progress: Callable[[int], None] | None) -> Iterator[str]:
    # surrogateescape keeps undecodable bytes visible (as lone surrogates) so the row can be flagged.
    with path.open("rb") as fh:
        for raw in fh:
            if progress:
                progress(len(raw))
            yield raw.decode("utf-8", errors="surrogateescape").rstrip("\r\n")


def _bad_utf8(text: str) -> bool:
    return any("\udc80" <= ch <= "\udcff" for ch in text)


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


def read_rows(path: Path, text_column: str | None = None, progress=None) -> Iterator[Row]:
    """Rows of a .txt (one text a line), .tsv/.csv (with header) or .jsonl file, lazily."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in INPUT_SUFFIXES:
        raise DataError(f"{path}: unsupported input type '{suffix}'; use one of {', '.join(INPUT_SUFFIXES)}")
    lines = _decoded_lines(path, progress)
    if suffix == ".txt":
        for n, line in enumerate(lines, 1):
            yield Row(n, None, "not valid UTF-8") if _bad_utf8(line) else Row(n, line)
    elif suffix == ".jsonl":
        yield from _jsonl_rows(path, lines, text_column)
    else:
        yield from _table_rows(path, lines, "\t" if suffix == ".tsv" else ",", text_column)


def _jsonl_rows(path, lines, text_column):
    column = text_column
    for n, line in enumerate(lines, 1):
        if not line.strip():
            yield Row(n, None, "empty line")
            continue
        if _bad_utf8(line):
            yield Row(n, None, "not valid UTF-8")
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            yield Row(n, None, f"invalid JSON ({err.msg})")
            continue
        if not isinstance(record, dict):
            yield Row(n, None, "not a JSON object")
            continue
        column = column or pick_column(list(record), None, TEXT_COLUMNS, path)
        text = record.get(column)
        if not isinstance(text, str):
            yield Row(n, None, f"'{column}' is {'missing' if text is None else type(text).__name__}, not text")
            continue
        yield Row(n, text)


def _table_rows(path, lines, delimiter, text_column):
    if delimiter == "\t":  # TSV as ChnSentiCorp writes it: no quoting
        header = next(lines, None)
        if header is None:
            return
        columns = header.split("\t")
        index = columns.index(pick_column(columns, text_column, TEXT_COLUMNS, path))
        for n, line in enumerate(lines, 2):
            fields = line.split("\t", len(columns) - 1)
            yield _field_row(n, fields, index, len(columns))
        return
    counter = {"line": 0}

    def counted():
        for line in lines:
            counter["line"] += 1
            yield line

    reader = csv.reader(counted())
    columns = next(reader, None)
    if columns is None:
        return
    index = columns.index(pick_column(columns, text_column, TEXT_COLUMNS, path))
    start = counter["line"] + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            yield Row(start, None, f"unreadable CSV ({err})")
            start = counter["line"] + 1
            continue
        yield _field_row(start, fields, index, len(columns))
        start = counter["line"] + 1


def _field_row(n: int, fields: list[str], index: int, width: int) -> Row:
    if len(fields) < width:
        return Row(n, None, f"expected {width} columns, found {len(fields)}")
    text = fields[index]
    return Row(n, None, "not valid UTF-8") if _bad_utf8(text) else Row(n, text)


class PredictionWriter:
    """Writes `DST` as `.DST.partial` and renames it into place on `close()`."""

    def __init__(self, path: Path, labels: list[str]):
        path = Path(path)
        self.suffix = path.suffix.lower()
        if self.suffix not in OUTPUT_SUFFIXES:
            raise DataError(f"{path}: unsupported output type '{self.suffix}'; use one of {', '.join(OUTPUT_SUFFIXES)}")
        self.path, self.labels = path, labels
        self.partial = path.with_name(f".{path.name}.partial")
        self.fh = self.partial.open("w", encoding="utf-8", newline="")
        self.columns = ["line", "text", "label", "score", *[f"prob_{lab}" for lab in labels], "truncated", "error"]
        if self.suffix != ".jsonl":
            self.csv = csv.writer(self.fh, delimiter="\t" if self.suffix == ".tsv" else ",",
                                  quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
            self.csv.writerow(self.columns)

    def write(self, row: Row, prediction) -> None:
        if self.suffix == ".jsonl":
            record = {"line": row.line, "text": row.text}
            record.update(prediction.to_json() if prediction else {"label": None, "score": None,
                                                                   "probabilities": None, "truncated": None})
            record["error"] = row.error
            self.fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        text = row.text.replace("\t", " ") if (row.text and self.suffix == ".tsv") else row.text
        if prediction:
            probs = [f"{prediction.probabilities[lab]:.6f}" for lab in self.labels]
            self.csv.writerow([row.line, text, prediction.label, f"{prediction.score:.6f}", *probs,
                               prediction.truncated, ""])
        else:
            self.csv.writerow([row.line, text or "", "", "", *[""] * len(self.labels), "", row.error])

    def close(self) -> None:
        self.fh.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        self.fh.close()
        self.partial.unlink(missing_ok=True)


def predict_file(predictor, src: Path, dst: Path, batch_size: int = 32, chunk_rows: int = 1024,
                 text_column: str | None = None, progress: Callable[[int], None] | None = None) -> dict:
    """Score `src` into `dst` in chunks of `chunk_rows`; returns counts and the line numbers of error rows."""
    writer = PredictionWriter(dst, predictor.labels)
    counts = {"rows": 0, "predicted": 0, "errors": 0, "truncated": 0, "error_lines": []}
    try:
        chunk: list[Row] = []
        for row in read_rows(Path(src), text_column, progress):
            chunk.append(row)
            if len(chunk) >= chunk_rows:
                _flush(predictor, chunk, writer, counts, batch_size)
                chunk = []
        _flush(predictor, chunk, writer, counts, batch_size)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return counts


def _flush(predictor, chunk: list[Row], writer: PredictionWriter, counts: dict, batch_size: int) -> None:
    good = [r for r in chunk if r.error is None]
    predictions = iter(predictor.predict([r.text for r in good], batch_size=batch_size))
    for row in chunk:
        prediction = next(predictions) if row.error is None else None
        writer.write(row, prediction)
        counts["rows"] += 1
        if prediction is None:
            counts["errors"] += 1
            if len(counts["error_lines"]) < 1000:  # bounded: the file itself lists every error row
                counts["error_lines"].append(row.line)
        else:
            counts["predicted"] += 1
            counts["truncated"] += prediction.truncated
    writer.fh.flush()


__all__ = ["PredictionWriter", "Row", "predict_file", "read_rows", "TEXT_COLUMNS"]
