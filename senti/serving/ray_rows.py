"""The input of `senti predict --engine ray`: JSONL, CSV or Parquet files read as a stream of numbered blocks.

Ray Data's own readers were used before, and each cost something here: `read_text` reads a whole file into one
block (a 10-million-line file held by one worker), a row's position had to come from a `count()` that executed
the read a second time and a `zip` that kept the input in order, and `splitlines` cut lines at characters JSON
allows inside strings. `NumberedRows` reads every file as a stream, one actor call's rows a block, with the
rules of `senti predict`'s own reader (`core.rows.read_rows`: bad lines become error rows), and numbers each row
by its position in the input (files in sorted order) from counts made in the driver beforehand (`count_rows`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path

import pyarrow as pa
from ray.data.datasource import FileBasedDatasource

from senti.core.errors import DataError, SentiError
from senti.core.rows import read_rows

ROW_ID = "_row"  # the id column when the input has none: the row's position


class _RawStream(io.RawIOBase):
    """A pyarrow input stream as a Python raw file: `io.BufferedReader` over it iterates lines."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        data = self._stream.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def count_rows(path: str, kind: str, text_column: str, id_column: str | None) -> int:
    """Rows `NumberedRows` will read from `path`, in the driver, holding one chunk at a time: Parquet from its
    footer, JSON lines by counting newlines, CSV with the reader itself (a quoted field may hold a newline).
    A file that cannot be read as asked is a SentiError naming it, before Ray starts."""
    if kind == ".parquet":
        return _parquet_rows(path, text_column, id_column)
    try:
        if kind == ".csv":
            return sum(1 for _ in read_rows(Path(path), text_column, kind=".csv"))
        _first_record(path, text_column)
    except DataError as err:
        raise SentiError(f"--input {err}") from None
    lines, ended = count_newlines(path)
    return lines + (not ended)  # a last line without its newline is a row too


def count_newlines(path) -> tuple[int, bool]:
    """(newlines in the file, whether it is empty or ends with one), read 8 MB at a time."""
    lines, last = 0, b"\n"
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 23):
            lines += chunk.count(b"\n")
            last = chunk[-1:]
    return lines, last == b"\n"


def _first_record(path: str, text_column: str) -> None:
    """The reader picks the text column at a file's first good record and stops with DataError when it lacks the
    column: checked here, so that no worker stops mid-job for it."""
    for row in read_rows(Path(path), text_column, kind=".jsonl"):
        if row.error is None:
            return


def _parquet_rows(path: str, text_column: str, id_column: str | None) -> int:
    import pyarrow.parquet as pq

    try:
        meta = pq.ParquetFile(path).metadata
    except (OSError, pa.ArrowException) as err:
        raise SentiError(f"--input {path}: not a readable Parquet file ({err})") from None
    names = meta.schema.to_arrow_schema().names
    for role, column in (("text", text_column), ("id", id_column)):
        if column is not None and column not in names:
            raise SentiError(f"--input {path}: no {role} column '{column}' (columns: {', '.join(names)})")
    return meta.num_rows


class NumberedRows(FileBasedDatasource):
    """Blocks of `rows` rows, each with the text column, `_error` (why the row cannot be scored, or null) and the
    id column: the input's `id_column` as text, or `_row`, the row's position (`firsts[i]` is the position of
    file i's first row)."""

    def __init__(self, paths: list[str], kind: str, firsts: list[int], text_column: str, id_column: str | None,
                 rows: int) -> None:
        super().__init__(paths)
        self._first = {os.path.realpath(p): first for p, first in zip(paths, firsts)}
        self._kind, self._text, self._id, self._rows = kind, text_column, id_column, rows

    @property
    def id_column(self) -> str:
        return self._id or ROW_ID

    def _open_input_source(self, filesystem, path: str, **open_args):
        if self._kind == ".parquet":  # a Parquet reader seeks (footer first)
            return filesystem.open_input_file(path)
        return super()._open_input_source(filesystem, path, **open_args)

    def _read_stream(self, f, path: str) -> Iterator[pa.Table]:
        first = self._first[os.path.realpath(path)]
        if self._kind == ".parquet":
            yield from self._parquet_blocks(f, first)
            return
        lines = io.BufferedReader(_RawStream(f), 1 << 20)
        rows = iter(read_rows(Path(path), self._text, stream=lines, kind=self._kind))
        while chunk := list(islice(rows, self._rows)):
            yield self._block(chunk, first, Path(path).name)
            first += len(chunk)

    def _parquet_blocks(self, f, first: int) -> Iterator[pa.Table]:
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        columns = [self._text] + ([self._id] if self._id else [])
        for batch in pq.ParquetFile(f).iter_batches(batch_size=self._rows, columns=columns):
            n = batch.num_rows
            ids = (pc.cast(batch.column(self._id), pa.string()) if self._id
                   else pa.array([str(first + k) for k in range(n)], pa.string()))
            yield pa.table({self._text: batch.column(self._text), "_error": pa.nulls(n, pa.string()),
                            self.id_column: ids})
            first += n

    def _block(self, rows: list, first: int, name: str) -> pa.Table:
        """A block of `rows` (core.rows.Row) of the file `name` whose first is the input's row `first`. A row that
        could not be read has no id of its own: its error says where it is."""
        ids: list[str | None]
        errors = [r.error for r in rows]
        if self._id is None:
            ids = [str(first + k) for k in range(len(rows))]
        else:
            values = [None if r.record is None else r.record.get(self._id) for r in rows]
            ids = [None if v is None else str(v) for v in values]
            errors = [f"{name}:{r.line}: {e}" if e is not None and r.record is None else e for r, e in zip(rows, errors)]
        return pa.table({self._text: pa.array([r.text for r in rows], pa.string()),
                         "_error": pa.array(errors, pa.string()),
                         self.id_column: pa.array(ids, pa.string())})
