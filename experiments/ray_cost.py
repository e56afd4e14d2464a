"""Ray's CPU efficiency on growing inputs: how its fixed cost amortizes (`senti bench --suite ray`'s measure).

    python -m experiments.ray_cost --model EXPORT --rows 100000 --rows 1000000
        [--rounds 3] [--actors N --threads-per-actor T] [--dataset ../shared/data/chnsenticorp] [--threads 2]
        [--output ray_cost.json]

For each row count: one Parquet file of dev texts (repeated), scored in process and then by a fresh local Ray;
efficiency = CPU-seconds in process / busy CPU-seconds of the whole machine during the Ray run (start-up
included). With --rounds N each row count is measured N times, in process and Ray interleaved, and the median
is printed: on a shared machine one round's in-process side alone moves by a tenth. Run it with PYTHONPATH set
to another checkout to measure that build on the same machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="an export folder")
    parser.add_argument("--rows", type=int, action="append", required=True, help="rows to score (repeat)")
    parser.add_argument("--dataset", default="../shared/data/chnsenticorp")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="measurements per row count (median printed)")
    parser.add_argument("--actors", type=int, help="Ray actors (default: what senti predict --engine ray picks)")
    parser.add_argument("--threads-per-actor", type=int)
    parser.add_argument("--output", help="write the records here as JSON")
    args = parser.parse_args(argv)
    from senti.toolkit.data.splits import load_splits

    texts = [e.text for e in load_splits(args.dataset).dev]
    records = []
    with tempfile.TemporaryDirectory() as work:
        for rows in args.rows:
            rounds = [_round(args, texts, Path(work) / str(rows), rows, n) for n in range(1, args.rounds + 1)]
            if len(rounds) > 1:
                print(f"{rows:,} rows, median of {len(rounds)}: CPU efficiency "
                      f"{statistics.median(r['cpu_efficiency'] for r in rounds):.3f} (in process "
                      f"{statistics.median(r['in_process_cpu_s'] for r in rounds):.1f} CPU-s, Ray machine-wide "
                      f"{statistics.median(r['ray_busy_cpu_s'] for r in rounds):.1f})", flush=True)
            records.extend(rounds)
    if args.output:
        Path(args.output).write_text(json.dumps(records, indent=1), encoding="utf-8")
    return records


def _round(args, texts: list[str], work: Path, rows: int, n: int) -> dict:
    from senti.benchmarks.ray_load import bench_ray
    from senti.serving.ray_predict import RayJob

    record = bench_ray(Path(args.model), texts, work, rows=rows, threads=args.threads,
                       job=RayJob(actors=args.actors, threads_per_actor=args.threads_per_actor))
    record["round"] = n
    print(f"{rows:,} rows, round {n}, {record['actors']} actor(s) x {record['threads_per_actor']} thread(s): "
          f"CPU efficiency {record['cpu_efficiency']:.3f} (in process "
          f"{record['in_process_cpu_s']:.1f} CPU-s, {record['in_process_busy_cpu_s']:.1f} machine-wide; Ray "
          f"machine-wide {record['ray_busy_cpu_s']:.1f}); {record['ray_texts_per_s']:.0f} texts/s against "
          f"{record['in_process_texts_per_s']:.0f}; start-up {record['ray_startup_s']:.1f} s; by process "
          f"{record['cpu_s_by_process']}", flush=True)
    return record


if __name__ == "__main__":
    main()
