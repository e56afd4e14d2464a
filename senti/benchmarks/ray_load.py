"""Ray suite: `senti predict --engine ray` against the in-process Predictor on the same Parquet file, one run.

Besides texts/s, the cost: CPU efficiency = CPU-seconds in process / busy CPU-seconds of the whole machine
during the Ray run (driver, raylet, GCS, workers and Ray's own actors all count; start-up included), read
from the OS. On enough rows the start-up is amortised: the student shape runs 100,000 of them.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from senti.benchmarks.markdown import number, table

if TYPE_CHECKING:
    from senti.serving.ray_predict import RayJob

STUDENT_ROWS = 100_000  # rows for the small shape, so Ray's start-up is a small part of the run
OTHER_ROWS = 3_000


def _busy_cpu_seconds() -> float:
    """Machine-wide CPU-seconds spent not idle (every process, ours or Ray's)."""
    import psutil

    t = psutil.cpu_times()
    return sum(getattr(t, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal"))


def _cpu_by_process() -> dict[int, tuple[str, float]]:
    """pid -> (name, user + system CPU-seconds) of every process on the machine."""
    import psutil

    found = {}
    for proc in psutil.process_iter(["name", "cpu_times"]):
        times = proc.info.get("cpu_times")
        if times is not None:
            found[proc.pid] = (proc.info.get("name") or "?", times.user + times.system)
    return found


class _ProcessWatch:
    """The last CPU figure of every process seen while a run lasts, read once a second: Ray Data stops an actor once
    its last call is done, and a process that ended before the run did is gone from a reading taken at the end.
    A reading costs about 4 ms of CPU (70-90 processes), which the run's machine-wide figure counts."""

    def __init__(self, every_s: float = 1.0):
        import threading

        self.seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(every_s,), daemon=True)

    def _watch(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.seen.update(_cpu_by_process())

    def __enter__(self) -> _ProcessWatch:
        self.seen.update(_cpu_by_process())
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.seen.update(_cpu_by_process())


def bench_ray(export_dir: Path, texts: list[str], work: Path, rows: int, threads: int = 2, shape: str = "",
              job: RayJob | None = None) -> dict:
    """texts/s and CPU-seconds in process and through a fresh local Ray (start-up timed apart), on one Parquet file.
    `job` (a RayJob: actors, threads a actor, batch size) as `senti predict --engine ray` takes it (None: its
    default layout, batches of 32)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import ray

    from senti.serving import Predictor
    from senti.serving.ray_predict import RayJob, predict_with_ray

    job = job or RayJob()
    batch_size = job.batch_size
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"ray_input_{rows}.parquet"
    column = [texts[i % len(texts)] for i in range(rows)]
    pq.write_table(pa.table({"id": [str(i) for i in range(rows)], "text": column}), source)

    predictor = Predictor.load(export_dir, threads=threads, ort_spinning=False)  # as the actors run it
    backend = predictor.backend_name
    predictor.predict(column[:batch_size], batch_size=batch_size)
    w0, c0, b0 = time.perf_counter(), time.process_time(), _busy_cpu_seconds()
    predictor.predict(pq.read_table(source).column("text").to_pylist(), batch_size=batch_size)
    in_process_s, in_process_cpu = time.perf_counter() - w0, time.process_time() - c0
    # The machine's other work during the same span: what the Ray side's machine-wide figure also counts.
    in_process_busy = _busy_cpu_seconds() - b0
    del predictor

    if ray.is_initialized():
        ray.shutdown()
    dest = work / f"ray_output_{time.time_ns()}.parquet"
    busy0 = _busy_cpu_seconds()
    with _ProcessWatch() as watch:
        procs0 = dict(watch.seen)  # its first reading, taken on entering
        result = predict_with_ray(export_dir, str(source), str(dest), replace(job, id_column="id", backend=backend))
        ray_cpu = _busy_cpu_seconds() - busy0
    # Where the CPU went, by process name (a process that ended counts up to its last reading, at most 1 s old).
    by_name: dict[str, float] = {}
    for pid, (name, cpu) in watch.seen.items():
        by_name[name] = by_name.get(name, 0.0) + cpu - procs0.get(pid, (name, 0.0))[1]
    top = dict(sorted(((n, round(c, 1)) for n, c in by_name.items() if c > 0.05), key=lambda x: -x[1])[:8])
    ray.shutdown()
    scoring_s = result["total_s"] - result["ray_startup_s"]
    return {"suite": "ray", "shape": shape, "rows": rows, "backend": backend, "in_process_texts_per_s": rows / in_process_s,
            "ray_texts_per_s": rows / scoring_s, "ray_over_in_process": in_process_s / scoring_s,
            "ray_startup_s": result["ray_startup_s"], "ray_total_s": result["total_s"],
            "in_process_cpu_s": in_process_cpu, "in_process_busy_cpu_s": in_process_busy, "ray_busy_cpu_s": ray_cpu,
            "cpu_efficiency": in_process_cpu / ray_cpu,
            "actors": result["actors"], "threads_per_actor": result["threads_per_actor"],
            "rows_per_call": result.get("rows_per_call"), "errors": result["errors"], "rows_out": result["rows_out"],
            "cpu_s_by_process": top}


def run(ctx) -> list[dict]:
    """The suite: the bench's model on 3,000 rows and the 3l-128h student on 100,000 (1,000 rows with --quick)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return [{"suite": "ray", "skipped": "Ray is not installed (pip install 'senti[scale]')"}]
    from senti.benchmarks.models import STUDENT_SHAPE, student_export

    texts = [e.text for e in ctx.splits.dev]
    own_rows = STUDENT_ROWS if ctx.config.model == STUDENT_SHAPE else OTHER_ROWS
    runs = [(ctx.config.model, ctx.export_dir, 1000 if ctx.config.quick else own_rows)]
    if not ctx.config.quick and ctx.config.model != STUDENT_SHAPE:
        runs.append((STUDENT_SHAPE, student_export(ctx), STUDENT_ROWS))
    records = []
    for shape, export_dir, rows in runs:
        record = bench_ray(export_dir, texts, ctx.out / "ray", rows=rows, threads=ctx.threads, shape=shape)
        ctx.say(f"ray {shape}, {rows} rows: CPU efficiency {record['cpu_efficiency']:.2f}; "
                f"{record['ray_texts_per_s']:.0f} texts/s against {record['in_process_texts_per_s']:.0f} in process "
                f"({record['ray_over_in_process']:.0%}); start-up {record['ray_startup_s']:.1f} s")
        records.append(record)
    return records


def report(results) -> list[str]:
    records = results.by_suite("ray")
    if records and records[0].get("skipped"):
        return ["", "## Ray Data", "", f"Skipped: {records[0]['skipped']}."]
    rows = [[r.get("shape", ""), f"{r['rows']:,}", r["backend"], f"{r['actors']} x {r['threads_per_actor']}",
             number(r["in_process_texts_per_s"], 0), number(r["ray_texts_per_s"], 0), f"{r['ray_over_in_process']:.0%}",
             f"{r['cpu_efficiency']:.2f}" if "cpu_efficiency" in r else "—", number(r["ray_startup_s"]),
             number(r["ray_total_s"]), r["errors"]] for r in records]
    return ["", "## Ray Data", "", "One Parquet file scored by `senti predict --engine ray` on a fresh local Ray "
            "against a Predictor in this process. CPU efficiency = CPU-seconds in process / busy CPU-seconds of "
            "the whole machine during the Ray run, start-up included; texts/s after start-up.", "",
            table(["shape", "rows", "backend", "actors x threads", "in process texts/s", "Ray texts/s (after start-up)",
                   "wall ratio", "CPU efficiency", "start-up s", "whole run s", "errors"], rows)]
