"""Ray suite: `senti predict --engine ray` against the in-process Predictor on the same file, one run."""

from __future__ import annotations

import time
from pathlib import Path


def bench_ray(export_dir: Path, texts: list[str], work: Path, rows: int, backend: str = "onnx",
              threads: int = 2, batch_size: int = 32) -> dict:
    """texts/s in process and through a fresh local Ray (start-up timed apart), on one Parquet file."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import ray

    from senti.serving import Predictor
    from senti.serving.ray_predict import predict_with_ray

    work.mkdir(parents=True, exist_ok=True)
    source = work / "ray_input.parquet"
    column = [texts[i % len(texts)] for i in range(rows)]
    pq.write_table(pa.table({"id": [str(i) for i in range(rows)], "text": column}), source)

    predictor = Predictor.load(export_dir, backend=backend, threads=threads)
    predictor.predict(column[:batch_size], batch_size=batch_size)
    t0 = time.perf_counter()
    predictor.predict(pq.read_table(source).column("text").to_pylist(), batch_size=batch_size)
    in_process_s = time.perf_counter() - t0
    del predictor

    if ray.is_initialized():
        ray.shutdown()
    dest = work / f"ray_output_{time.time_ns()}.parquet"
    result = predict_with_ray(export_dir, str(source), str(dest), id_column="id", backend=backend,
                              batch_size=batch_size)
    ray.shutdown()
    scoring_s = result["total_s"] - result["ray_startup_s"]
    return {"suite": "ray", "rows": rows, "backend": backend, "in_process_texts_per_s": rows / in_process_s,
            "ray_texts_per_s": rows / scoring_s, "ray_over_in_process": in_process_s / scoring_s,
            "ray_startup_s": result["ray_startup_s"], "ray_total_s": result["total_s"],
            "actors": result["actors"], "threads_per_actor": result["threads_per_actor"],
            "errors": result["errors"], "rows_out": result["rows_out"]}


def run(ctx) -> list[dict]:
    """The suite: `senti predict --engine ray` on a fresh local Ray against the in-process Predictor."""
    try:
        import ray  # noqa: F401
    except ImportError:
        return [{"suite": "ray", "skipped": "Ray is not installed (pip install 'senti[scale]')"}]
    record = bench_ray(ctx.export_dir, [e.text for e in ctx.splits.dev], ctx.out / "ray", threads=ctx.threads,
                       rows=1000 if ctx.config.quick else 3000)
    ctx.say(f"ray: {record['ray_texts_per_s']:.0f} texts/s against {record['in_process_texts_per_s']:.0f} "
            f"in process ({record['ray_over_in_process']:.0%}); start-up {record['ray_startup_s']:.1f} s")
    return [record]


def report(results) -> list[str]:
    lines = []
    for r in results.by_suite("ray"):
        lines += ["", "## Ray Data", ""]
        if r.get("skipped"):
            lines.append(f"Skipped: {r['skipped']}.")
            continue
        lines.append(f"{r['rows']:,} rows from one Parquet file, backend {r['backend']}: in process "
                     f"{r['in_process_texts_per_s']:,.0f} texts/s; `senti predict --engine ray` "
                     f"({r['actors']} actors x "
                     f"{r['threads_per_actor']} threads) {r['ray_texts_per_s']:,.0f} texts/s after start-up "
                     f"({r['ray_over_in_process']:.0%} of in process), {r['rows_out']:,} rows out, "
                     f"{r['errors']} errors; "
                     f"Ray start-up {r['ray_startup_s']:.1f} s, whole run {r['ray_total_s']:.1f} s.")
    return lines
