"""Score files row by row in bounded memory: exactly one output row per input row, in order.

Rows that cannot be read (bad UTF-8, bad JSON, no text) become error rows with their line
numbers; nothing is dropped. The output appears under its name only when complete.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from senti.core import layout, stopping
from senti.core.artifacts import remove_stale_work
from senti.core.errors import DataError
from senti.core.rows import TEXT_COLUMNS, Row, read_rows, suffixes
from senti.serving.drift import DriftCounter
from senti.serving.predictor import text_problem

OUTPUT_SUFFIXES = suffixes("output")
ENGINES = ("local", "ray")  # files scored in this process (streamed), or by Ray Data (senti.serving.ray_predict)


STDIO = "-"  # --input - / --output -: standard input, standard output (JSONL)


class PredictionWriter:
    """Writes `DST` as a hidden `.DST.partial-PID-` file and renames it into place on `close()`; the
    leftovers of a killed run are removed first (`stale` lists them). `DST` "-" is standard output (JSONL)."""

    def __init__(self, path: Path | str, labels: list[str], id_column: str | None = None):
        self.path: Path | None
        self.partial: Path | None
        self.id_column = id_column
        if str(path) == STDIO:
            self.path, self.labels, self.suffix, self.stale, self.partial = None, labels, ".jsonl", [], None
            self.fh = sys.stdout
            return
        path = Path(path)
        self.suffix = path.suffix.lower()
        if self.suffix not in OUTPUT_SUFFIXES:
            raise DataError(f"{path}: unsupported output type '{self.suffix}'; use one of {', '.join(OUTPUT_SUFFIXES)}")
        self.path, self.labels = path, labels
        self.stale = remove_stale_work(path.parent, path.name, "partial")
        self.partial = path.with_name(layout.work_prefix(path.name, "partial") + "out")
        self.fh = self.partial.open("w", encoding="utf-8", newline="")
        self.columns = ["line", *(["id"] if id_column else []), "text", "label", "score",
                        *[f"prob_{lab}" for lab in labels], "unsure", "truncated", "error"]
        if self.suffix != ".jsonl":
            self.csv = csv.writer(self.fh, delimiter="\t" if self.suffix == ".tsv" else ",",
                                  quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
            self.csv.writerow(self.columns)

    def write(self, row: Row, prediction) -> None:
        if row.text is not None and text_problem(row.text):  # a lone surrogate cannot be written as UTF-8
            row.text = row.text.encode("utf-8", "backslashreplace").decode("utf-8")
        if self.suffix == ".jsonl":
            record = {"line": row.line, **({"id": self.row_id(row)} if self.id_column else {}), "text": row.text}
            record.update(prediction.to_json() if prediction else {"label": None, "score": None,
                                                                   "probabilities": None, "unsure": None,
                                                                   "truncated": None})
            record["error"] = row.error
            self.fh.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        text = row.text.replace("\t", " ") if (row.text and self.suffix == ".tsv") else row.text
        where = [row.line, *([self.row_id(row) or ""] if self.id_column else [])]
        if prediction:
            probs = [f"{prediction.probabilities[lab]:.6f}" for lab in self.labels]
            self.csv.writerow([*where, text, prediction.label, f"{prediction.score:.6f}", *probs,
                               prediction.unsure, prediction.truncated, ""])
        else:
            self.csv.writerow([*where, text or "", "", "", *[""] * len(self.labels), "", "", row.error])

    def row_id(self, row: Row) -> str | None:
        """The row's value of the id column, as text; None when it has none."""
        value = (row.record or {}).get(self.id_column) if self.id_column else None
        return None if value is None or str(value) == "" else str(value)

    def close(self) -> None:
        if self.partial is None or self.path is None:  # standard output
            self.fh.flush()
            return
        self.fh.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        if self.partial is None:
            return
        self.fh.close()
        self.partial.unlink(missing_ok=True)


class UnsureQueue:
    """`--unsure-output`: the rows answered below the export's abstention threshold, as `senti label` reads picks
    (every input column, then `line`, `guess`, `confidence`, `reason` and `labels`, as `senti select` writes them),
    written as a hidden partial file and renamed into place on `close()`."""

    def __init__(self, path: Path | str, labels: list[str]):
        path = Path(path)
        self.path, self.labels, self.rows = path, labels, 0
        self.stale = remove_stale_work(path.parent, path.name, "partial")
        self.partial = path.with_name(layout.work_prefix(path.name, "partial") + "out")
        self.fh = self.partial.open("w", encoding="utf-8")

    def write(self, row: Row, prediction) -> None:
        if prediction is None or not prediction.unsure:
            return
        record = dict(row.record) if isinstance(row.record, dict) else {}
        record.setdefault("text", row.text)
        names = senti_names(record, ("line", "guess", "confidence", "reason", "labels"))
        record.update({names["line"]: row.line, names["guess"]: prediction.label,
                       names["confidence"]: round(prediction.score, 6),
                       names["reason"]: "unsure: below the export's abstention threshold",
                       names["labels"]: self.labels})
        self.fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.rows += 1

    def close(self) -> None:
        self.fh.close()
        os.replace(self.partial, self.path)

    def abort(self) -> None:
        self.fh.close()
        self.partial.unlink(missing_ok=True)


def check_unsure_output(predictor, src: Path | str, dst: Path | str, queue: Path | str) -> None:
    """Refuse, before anything is scored, an unsure queue that cannot be written or would mean nothing."""
    if predictor.abstain is None:
        raise DataError(f"{predictor.export_dir}: this export has no abstention threshold, so no answer is unsure; "
                        "export it with --abstain precision=P (or coverage=C) for --unsure-output")
    if str(queue) == STDIO or Path(queue).suffix.lower() != ".jsonl":
        raise DataError(f"--unsure-output {queue}: the unsure queue is written as JSONL (senti label reads it); "
                        "name a .jsonl file")
    check_output(src, queue, suffixes=(".jsonl",), holds="the unsure queue")
    if str(dst) != STDIO and Path(queue).resolve() == Path(dst).resolve():
        raise DataError(f"--unsure-output {queue}: give a file of its own, not the --output file")


def senti_names(used, names) -> dict[str, str]:
    """senti's column `names`, each prefixed with `senti_` (as often as needed) where the input already uses it
    (`used`: the input's column names), so an input's own `label` or `line` is kept beside senti's (senti select
    and the unsure queue write them; senti label reads them back)."""
    out = {}
    for name in names:
        free = name
        while free in used:
            free = f"senti_{free}"
        out[name] = free
    return out


def check_output(src: Path | str | None, dst: Path | str, suffixes=OUTPUT_SUFFIXES, holds: str = "the scores") -> None:
    """Refuse, before any model loads or any text is scored, an output that cannot be written or would overwrite
    the input (senti predict, select, eval and label alike); `holds`: what the output is for, in the message."""
    if str(dst) == STDIO:
        return
    dst = Path(dst)
    if dst.is_dir():
        raise DataError(f"--output {dst}: is a folder; name a file in it")
    if dst.suffix.lower() not in suffixes:
        why = f" (a .txt file cannot hold {holds})" if dst.suffix.lower() == ".txt" else ""
        raise DataError(f"--output {dst}: unsupported output type '{dst.suffix}'; use one of "
                        f"{', '.join(suffixes)}{why}")
    if not dst.parent.is_dir():
        raise DataError(f"--output {dst}: the folder {dst.parent} does not exist")
    if src is not None and dst.resolve() == Path(src).resolve():
        raise DataError(f"--output {dst} is the input file; write elsewhere")


@dataclass(frozen=True)
class Columns:
    """Which of the input's columns hold the text and the id (None: the usual names; no id), and its format when
    the file's name does not say it (standard input: ".txt" or ".jsonl")."""

    text: str | None = None
    id: str | None = None
    input_format: str | None = None


def predict_file(predictor, src: Path | str, dst: Path | str, batch_size: int = 32, chunk_rows: int = 1024,
                 columns: Columns | None = None, progress: Callable[[int], None] | None = None,
                 unsure_output: Path | str | None = None) -> dict:
    """Score `src` into `dst` in chunks of `chunk_rows`; returns counts and the line numbers of error rows.

    `src` "-" reads standard input and `dst` "-" writes JSONL to standard output; from a pipe, a chunk is also
    handed over whenever the input pauses, so answers stream out. `unsure_output` (JSONL) also gets the rows
    answered below the export's abstention threshold, as picks `senti label` reads.
    """
    columns = columns or Columns()
    text_column, id_column, input_format = columns.text, columns.id, columns.input_format
    check_output(src, dst)
    if unsure_output is not None:
        check_unsure_output(predictor, src, dst, unsure_output)
    kind = input_format or (".txt" if str(src) == STDIO else Path(src).suffix.lower())
    if id_column and kind == ".txt":
        raise DataError(f"--id-column {id_column}: a .txt input has no columns; give a .tsv, .csv or .jsonl file")
    writer = PredictionWriter(dst, predictor.labels, id_column)
    queue = UnsureQueue(unsure_output, predictor.labels) if unsure_output is not None else None
    counts: dict[str, Any] = {"rows": 0, "predicted": 0, "errors": 0, "truncated": 0, "unsure": 0, "error_lines": [],
              "stale_removed": [str(p) for p in writer.stale], "drift": DriftCounter()}
    try:
        if str(src) == STDIO:
            rows = read_rows(Path("<stdin>"), text_column, stream=sys.stdin.buffer, kind=input_format or ".txt")
            chunks = _chunks_as_they_come(rows, min(chunk_rows, 256), pause_s=0.05)
        else:
            rows = read_rows(Path(src), text_column, progress=progress, kind=input_format)
            chunks = _chunks(rows, chunk_rows)
        for chunk in chunks:
            stopping.checkpoint()
            _flush(predictor, chunk, (writer, queue), counts, batch_size)
    except BaseException:
        writer.abort()
        if queue is not None:
            queue.abort()
        raise
    writer.close()
    if queue is not None:
        queue.close()
    counts["drift"] = counts["drift"].summary()
    return counts


def _chunks(rows, size: int):
    chunk = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _chunks_as_they_come(rows, size: int, pause_s: float):
    """Chunks of at most `size` rows, each handed over as soon as the input pauses for `pause_s`: a reader
    thread fills a queue, so a slow pipe (`tail -f`) gets its answers line by line, a fast one in batches."""
    import queue
    import threading

    lines: queue.Queue = queue.Queue(maxsize=4 * size)
    done = object()

    def read():
        try:
            for row in rows:
                lines.put(row)
        except BaseException as err:  # a bad header, say: raised where the chunks are consumed
            lines.put(err)
        lines.put(done)

    threading.Thread(target=read, daemon=True).start()
    while True:
        item = lines.get()
        chunk: list[Row] = []
        while True:
            if item is done or isinstance(item, BaseException):
                if chunk:
                    yield chunk
                if isinstance(item, BaseException):
                    raise item
                return
            chunk.append(item)
            if len(chunk) >= size:
                break
            try:
                item = lines.get(timeout=pause_s)
            except queue.Empty:
                break
        yield chunk


def predict_isolated(predictor, texts: list[str], batch_size: int) -> tuple[list, dict[int, str]]:
    """Predictions for the texts the predictor takes, None for the others, and why each one was refused:
    one bad text never costs the others their answers."""
    from senti.serving.predictor import InvalidText

    try:
        return predictor.predict(texts, batch_size=batch_size), {}
    except InvalidText as err:
        refused = err.problems
    kept = [i for i in range(len(texts)) if i not in refused]
    scored = dict(zip(kept, predictor.predict([texts[i] for i in kept], batch_size=batch_size)))
    return [scored.get(i) for i in range(len(texts))], refused


def _flush(predictor, chunk: list[Row], writers: tuple[PredictionWriter, UnsureQueue | None], counts: dict,
           batch_size: int) -> None:
    writer, queue = writers
    if writer.id_column:  # as senti predict --engine ray: a row without its id is not scored
        for r in chunk:
            if r.error is None and writer.row_id(r) is None:
                r.error = f"missing '{writer.id_column}'"
    good = [r for r in chunk if r.error is None]
    results, refused = predict_isolated(predictor, [r.text or "" for r in good], batch_size)
    for i, why in refused.items():
        good[i].error = why
    predictions = iter(results)
    scored = {id(r) for r in good}
    for row in chunk:
        prediction = next(predictions) if id(row) in scored else None
        writer.write(row, prediction)
        if queue is not None:
            queue.write(row, prediction)
        counts["rows"] += 1
        if prediction is None:
            counts["errors"] += 1
            if len(counts["error_lines"]) < 1000:  # bounded: the file itself lists every error row
                counts["error_lines"].append(row.line)
        else:
            counts["predicted"] += 1
            counts["truncated"] += prediction.truncated
            counts["unsure"] += prediction.unsure
            counts["drift"].add(prediction)
    writer.fh.flush()


__all__ = ["PredictionWriter", "Row", "predict_file", "read_rows", "TEXT_COLUMNS"]
