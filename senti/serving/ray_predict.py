"""`senti predict --engine ray`: the same Predictor, run by Ray Data over Parquet, JSONL or CSV.

Ray Data reads, `map_batches` scores with one `Predictor` per actor (loaded once, in the
actor's constructor), and Ray Data writes. Distributed output has no input order, so every
row carries an id: the input's id column, or the row's position in the input when it has none.
"""

from __future__ import annotations

import glob
import os
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from itertools import accumulate
from pathlib import Path

import numpy as np

from senti.core.errors import SentiError
from senti.core.rows import suffixes
from senti.serving.streaming import predict_isolated

INSTALL_HINT = "--engine ray needs Ray Data: pip install 'senti[scale]'"
READ_SUFFIXES = suffixes("ray")
WRITE_SUFFIXES = suffixes("ray_output")


class ScoreBatch:
    """Ray Data callable class: one Predictor per actor, reused for every batch it receives."""

    def __init__(self, export_dir: str, job: dict):
        from senti.serving.predictor import Predictor

        self.job = RayJob(**job)  # the placed job, as a dict: what Ray sends an actor's constructor
        # No spinning: between Ray's calls an actor's idle ONNX Runtime threads would busy-wait on cores that
        # Ray's own processes and the next block's reading need.
        self.predictor = Predictor.load(export_dir, backend=self.job.backend, threads=self.job.threads_per_actor,
                                        ort_spinning=False)
        self.text_column, self.id_column, self.batch_size = self.job.text_column, self.job.id_column, \
            self.job.batch_size
        self.labels = self.predictor.labels
        if self.job.aspects:  # checked before Ray started (_check_aspects); parsed here into Aspects
            from senti.core.aspects import parse_aspects

            self.aspects = parse_aspects(self.job.aspects, "--aspects")

    def __call__(self, batch: dict):
        import pyarrow as pa

        texts = list(batch[self.text_column]) if self.text_column in batch else [None] * len(batch[self.id_column])
        # A block whose values are all null arrives as float NaN, so only strings count as errors or texts.
        parsed = batch.get("_error", [None] * len(texts))
        errors = [e if isinstance(e, str) else None for e in parsed]
        ids = batch[self.id_column]
        for i, text in enumerate(texts):
            if errors[i] is None and (ids[i] is None or (isinstance(ids[i], float) and np.isnan(ids[i]))):
                errors[i] = f"missing '{self.id_column}'"
            if errors[i] is None and not isinstance(text, str):
                missing = text is None or (isinstance(text, float) and np.isnan(text))
                errors[i] = f"'{self.text_column}' is " + ("missing" if missing else type(text).__name__)
        good = [i for i, e in enumerate(errors) if e is None]
        results, refused = predict_isolated(self.predictor, [str(texts[i]) for i in good], self.batch_size)
        for j, why in refused.items():
            errors[good[j]] = why
        predictions = {i: p for i, p in zip(good, results) if p is not None}
        n = len(texts)
        # Typed columns: from numpy, a block whose errors (or labels) are all None became a column of Arrow's null
        # type, and an output folder whose parts disagree on a column's type is one pyarrow cannot read back.
        out = {
            "id": pa.array([None if v is None else str(v) for v in ids], pa.string()),
            "label": pa.array([predictions[i].label if i in predictions else None for i in range(n)], pa.string()),
            "score": pa.array([predictions[i].score if i in predictions else np.nan for i in range(n)], pa.float64()),
            "unsure": pa.array([bool(predictions[i].unsure) if i in predictions else False for i in range(n)],
                               pa.bool_()),
            "truncated": pa.array([bool(predictions[i].truncated) if i in predictions else False for i in range(n)],
                                  pa.bool_()),
            "error": pa.array(errors, pa.string()),
        }
        for lab in self.labels:
            out[f"prob_{lab}"] = pa.array([predictions[i].probabilities[lab] if i in predictions else np.nan
                                           for i in range(n)], pa.float64())
        if self.job.aspects:
            out.update(self._aspect_columns([str(texts[i]) for i in sorted(predictions)], sorted(predictions), n))
        return pa.table(out)

    def _aspect_columns(self, texts: list[str], rows: list[int], n: int) -> dict:
        """`aspect_NAME` (positive, neutral, negative or not_mentioned) and `aspect_NAME_score` for each aspect, as
        `senti aspects` answers; null on error rows."""
        import pyarrow as pa

        from senti.serving.aspects import answer_aspects

        answers = dict(zip(rows, answer_aspects(self.predictor, texts, self.aspects, self.job.unit,
                                                self.job.neutral_margin))) if texts else {}
        columns = {}
        for a in self.aspects:
            columns[f"aspect_{a.name}"] = pa.array([answers[i][a.name].polarity if i in answers else None
                                                    for i in range(n)], pa.string())
            columns[f"aspect_{a.name}_score"] = pa.array([answers[i][a.name].score if i in answers else None
                                                          for i in range(n)], pa.float64())
        return columns


def rows_per_actor_call(rows: int, actors: int, model_batch: int) -> int:
    """Rows Ray hands an actor per call. Each call costs Ray a task dispatch and a block (de)serialization,
    fixed costs that a small model's batch does not hide, so calls are large (up to 4,096 rows); but at least
    4 calls per actor, so a small input still spreads over the actors and the last call is not alone for long;
    and a whole number of model batches."""
    per_call = max(model_batch, min(4096, rows // max(1, 4 * actors)))
    return max(model_batch, per_call // model_batch * model_batch)


def quiet_ray_data() -> None:
    """Before Ray Data loads: its INFO progress lines flood a non-interactive log. Ray Data re-applies its
    logging config on every execution, resetting levels set in code; this variable wins over that config."""
    from senti.core.runtime import verbose

    if not verbose():
        os.environ.setdefault("RAY_DATA_LOG_LEVEL", "WARNING")


def _ray_log_level() -> int:
    """Ray's own INFO and WARNING lines (start-up, token authentication) only with SENTI_VERBOSE=1."""
    import logging

    from senti.core.runtime import verbose

    return logging.INFO if verbose() else logging.ERROR


def start_local_ray(ray, cpus: int) -> None:
    """A Ray on this machine that listens on loopback only.

    Ray turns a node address of 127.0.0.1 into the machine's own (`services.resolve_ip_for_localhost`), and
    then GCS, raylet and workers listen on every interface: an unauthenticated-by-default cluster reachable
    from the network, for a job that needs no network at all. Keeping the loopback address as given makes
    every Ray server bind 127.0.0.1 (listening sockets checked in tests/serving/test_ray_loopback.py).
    """
    import ray._private.services as services

    resolve = services.resolve_ip_for_localhost
    services.resolve_ip_for_localhost = lambda host: host if host in ("127.0.0.1", "localhost") else resolve(host)
    try:
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1",
                 logging_level=_ray_log_level())
    finally:
        services.resolve_ip_for_localhost = resolve


def _paths(source: str) -> list[str]:
    if any(ch in source for ch in "*?["):  # files only: an earlier output is a folder named like one
        found = sorted(p for p in glob.glob(source) if Path(p).is_file())
        if not found:
            raise SentiError(f"--input {source}: the pattern matches no file")
        return found
    path = Path(source)
    if not path.exists():
        raise SentiError(f"--input {source}: no such file or folder")
    if path.is_dir():
        found = sorted(str(p) for p in path.iterdir() if p.suffix.lower() in READ_SUFFIXES and p.is_file())
        if not found:
            raise SentiError(f"--input {source}: the folder has no {', '.join(READ_SUFFIXES)} files")
        return found
    return [str(path)]


def _input_and_output(source: str, dest: str) -> tuple[list[str], str, str]:
    """The input files, their one format and the output's, checked before Ray starts."""
    paths = _paths(source)
    kinds = {{".json": ".jsonl"}.get(Path(p).suffix.lower(), Path(p).suffix.lower()) for p in paths}
    if len(kinds) != 1:
        raise SentiError(f"--input {source}: mixed file types {sorted(kinds)}; use one format")
    out_kind = Path(dest).suffix.lower()
    if out_kind not in WRITE_SUFFIXES:
        raise SentiError(f"--output {dest}: name it {' or '.join(WRITE_SUFFIXES)} (Ray writes a folder of part files)")
    if Path(dest).exists():
        raise SentiError(f"--output {dest} already exists")
    return paths, kinds.pop(), out_kind


@dataclass
class RayJob:
    """Where and how the rows are scored: the cluster (`address`; None: a local Ray on this machine's cores), the
    actors and their threads (None: the serve rule, `placement_for`), the model's batch, the input's columns and
    the backend."""

    address: str | None = None
    actors: int | None = None
    threads_per_actor: int | None = None
    batch_size: int = 32
    text_column: str = "text"
    id_column: str | None = None
    backend: str = "auto"
    # aspect answers as columns (`aspect_NAME`, `aspect_NAME_score`): the aspect list as an aspect file holds it
    aspects: list | None = None
    unit: str = "sentence"
    neutral_margin: float = 0.0


def _check_aspects(job: RayJob, labels: list[str]) -> None:
    """A job's aspect settings checked before Ray starts, as `senti aspects` checks them: one line naming what is
    wrong."""
    if not job.aspects:
        return
    from senti.core.aspects import parse_aspects
    from senti.serving.aspects import check_settings

    check_settings(labels, job.unit, job.neutral_margin, parse_aspects(job.aspects, "--aspects"))


def _start_ray(ray, address: str | None) -> float:
    """Ray started (or joined at `address`) unless it already runs; the seconds it took."""
    from senti.core.runtime import available_cores

    started = time.perf_counter()
    _lean_data_context(ray)
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False, logging_level=_ray_log_level())
        else:
            start_local_ray(ray, available_cores())
    return time.perf_counter() - started


def predict_with_ray(export_dir: Path, source: str, dest: str, job: RayJob | None = None,
                     progress: Callable[[int, int], None] | None = None, progress_every_s: float = 1.0) -> dict:
    """Score `source` into `dest` (.parquet or .jsonl folder) on Ray as `job` says; returns counts and timings.
    `progress(rows written, rows in)` is called every `progress_every_s` seconds while Ray works."""
    job = job or RayJob()
    quiet_ray_data()
    try:
        import ray
    except ImportError:
        raise SentiError(INSTALL_HINT) from None
    from senti.serving import export_folder
    from senti.serving.placement import placement_for
    from senti.serving.ray_rows import NumberedRows, count_rows

    meta, _ = export_folder.read_meta(export_dir)  # a bad export fails here, before Ray starts
    _check_aspects(job, meta.labels)
    paths, kind, out_kind = _input_and_output(source, dest)
    # Counted here, before Ray starts, one file at a time (Parquet footers, a newline count, the CSV reader): the
    # row positions that number rows without an id column, and the size of an actor's call. Ray executes the plan
    # once, in the write.
    file_rows = [count_rows(path, kind, job.text_column, job.id_column) for path in paths]
    rows_in = sum(file_rows)
    started = time.perf_counter()
    startup_s = _start_ray(ray, job.address)
    cpus = int(ray.cluster_resources().get("CPU", 1))
    # The serve rule (actors for workers): a small model scores best as single-threaded actors, one a core. On
    # 2 cores 2 x 1 scored 100,000 rows 15% faster than 1 x 2 for the same CPU (docs/results/ray.md); 2 x 1 looked slower
    # only while one input block fed one actor (blocks of one call's rows fix that).
    layout = placement_for(meta, cpus, job.actors, job.threads_per_actor)
    light = {"num_cpus": 0.1}  # reading and parsing are cheap next to the model; leave the cores to the actors
    # Ray's CPU counts are logical: the actors' threads are set explicitly, and each actor reserves a
    # little less than its threads so that Ray Data's file-listing task (1 CPU) can always be placed;
    # reserving every core makes a small machine deadlock before the first file is read.
    reserve = layout.threads * (1 - 1 / max(cpus, 2))
    rows_per_call = rows_per_actor_call(rows_in, layout.workers, job.batch_size)

    firsts = list(accumulate(file_rows, initial=0))[:-1]  # each file's first row's position
    rows = NumberedRows(paths, kind, firsts, job.text_column, job.id_column, rows_per_call)
    # Streaming: a file is read in blocks of one actor call's rows (a big file is never held whole, and its blocks
    # spread over every actor), scored and written as blocks go; nothing of the output is held.
    placed = replace(job, actors=layout.workers, threads_per_actor=layout.threads, id_column=rows.id_column)
    scored = _score(ray, ray.data.read_datasource(rows, num_cpus=light["num_cpus"]), export_dir, placed,
                    rows_per_call, reserve)
    rows_out, errors = _write(scored, Path(dest), out_kind, light,
                              lambda folder: WrittenRows(folder, out_kind, rows_in, progress, progress_every_s))
    return {"rows_in": rows_in, "rows_out": rows_out, "errors": errors, "actors": layout.workers,
            "rows_per_call": rows_per_call, "threads_per_actor": layout.threads, "layout_why": layout.why,
            "cpus": cpus, "ray_startup_s": startup_s, "total_s": time.perf_counter() - started, "output": dest}


def _write(scored, dest: Path, kind: str, remote_args: dict, watch) -> tuple[int, int]:
    """Execute the plan into a hidden folder of this process beside `dest`, renamed to `dest` once whole: two runs
    given one --output wrote their rows into one folder, and an interrupted run left whole part files that looked
    like a finished output. A killed run's folder is removed by the next run (`layout.work_prefix`)."""
    import shutil

    from senti.core import layout
    from senti.core.artifacts import remove_stale_work

    remove_stale_work(dest.parent, dest.name, "partial")
    partial = dest.with_name(layout.work_prefix(dest.name, "partial") + "out")
    try:
        with watch(partial):
            if kind == ".parquet":
                scored.write_parquet(str(partial), ray_remote_args=remote_args)
            else:
                scored.write_json(str(partial), ray_remote_args=remote_args)
        rows_out, errors = count_written(partial, kind)
        if dest.exists():
            raise SentiError(f"--output {dest} was written by another run meanwhile; this run's rows are not kept")
        os.rename(partial, dest)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return rows_out, errors


def _score(ray, ds, export_dir, job: RayJob, rows_per_call: int, reserve: float):
    """The scored dataset (lazy: executed by the write that follows): `job.actors` ScoreBatch actors of
    `job.threads_per_actor` threads, `rows_per_call` rows a call."""
    with warnings.catch_warnings():
        # Ray 2.60 has no named map_batches parameter for max_restarts and warns about the generic route (to be
        # removed in Ray 2.64: revisit then); the setting is what keeps a local run free of Ray's restart warning.
        warnings.simplefilter("ignore", DeprecationWarning)
        return ds.map_batches(
            ScoreBatch, fn_constructor_kwargs=dict(export_dir=str(export_dir), job=asdict(job)),
            batch_size=rows_per_call, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=job.actors),
            num_cpus=reserve,
            # On this machine alone a crashed actor would only crash again: no restarts, which also spares the
            # driver Ray's warning about restartable actors whose constructor arguments live in the object store.
            **({"max_restarts": 0} if job.address is None else {}),
        )


class WrittenRows:
    """How far the job is, read from the part files written so far (Parquet footers; JSON lines counted per file,
    again only when the file grew) by a thread of the driver while Ray writes: `report(rows, total)` every
    `every_s` seconds."""

    def __init__(self, dest: Path, kind: str, total: int, report: Callable[[int, int], None] | None,
                 every_s: float) -> None:
        self.dest, self.kind, self.total, self.report, self.every_s = dest, kind, total, report, every_s
        self.counted: dict[str, tuple[int, int]] = {}  # part name -> (size, rows)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="senti-progress", daemon=True)

    def rows(self) -> int:
        import pyarrow.parquet as pq

        from senti.serving.ray_rows import count_newlines

        parts = list(self.dest.iterdir()) if self.dest.is_dir() else []
        for part in parts:
            try:
                size = part.stat().st_size
                if part.name.startswith((".", "_")) or self.counted.get(part.name, (-1, 0))[0] == size:
                    continue
                if self.kind == ".parquet":  # a part still being written has no footer yet: counted later
                    rows = pq.ParquetFile(part).metadata.num_rows
                else:
                    rows = count_newlines(part)[0]
            except Exception:  # noqa: BLE001 - a part being written or renamed; the next look counts it
                continue
            self.counted[part.name] = (size, rows)
        return sum(rows for _, rows in self.counted.values())

    def _watch(self) -> None:
        report = self.report
        assert report is not None  # the thread starts only with one
        while not self._stop.wait(self.every_s):
            report(self.rows(), self.total)

    def __enter__(self):
        if self.report is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def count_written(dest: Path, kind: str) -> tuple[int, int]:
    """(rows, error rows) of the part files Ray wrote to `dest`, read here one file at a time (Parquet: the footers
    and the error column only; JSON lines: line by line), so the count holds no more than one file's errors."""
    import json

    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows = errors = 0
    for part in sorted(p for p in dest.iterdir() if p.is_file() and not p.name.startswith((".", "_"))):
        if kind == ".parquet":
            rows += pq.ParquetFile(part).metadata.num_rows
            errors += int(pc.sum(pc.is_valid(pq.read_table(part, columns=["error"])["error"])).as_py() or 0)
            continue
        with part.open(encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rows += 1
                    errors += json.loads(line).get("error") is not None
    return rows, errors


def _lean_data_context(ray) -> None:
    """Ray Data's progress bars redraw from the driver all run long: off (senti reports the rows written, see
    `WrittenRows`). Its usage statistics are off too (this machine has no business reporting them)."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray.util.debug import log_once

    context = ray.data.DataContext.get_current()
    context.enable_operator_progress_bars = False
    context.enable_progress_bars = False  # senti's own line says how far the job is (WrittenRows)
    # Ray Data's issue detector printed a 15-line WARNING every 30 s into the command's output ("ReadText->
    # SplitBlocks(32) uses 258.5MiB of memory per worker"): senti sizes the pipeline itself (blocks of one actor
    # call, actors by the placement rule), so the detectors are off, as the warning itself says to turn them off.
    context.issue_detectors_config.detectors = []
    # Ray Data logs a one-time WARNING that the bars are off, which senti chose: its once is spent here.
    log_once("ray_data_progress_manager_disabled")
    log_once("ray_data_progress_manager_global")
