"""Peak memory of `senti predict --engine ray` against the row count: does it stay flat as the input grows?

    python -m experiments.ray_memory --model EXPORT --rows 100000,1000000 [--output report.json]

For each row count: a JSONL file of short synthetic reviews (ids included), then `senti predict --engine ray
--input FILE --output DIR.parquet` as a child process; every 0.5 s the RSS of each process in its tree (the
driver, Ray's GCS, raylet and workers, all started by it) is read with psutil. Reports the peak of the tree's sum,
the peak of the largest single process, the rows written and the wall time.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_rows(path: Path, n: int) -> None:
    rng = random.Random(0)
    words = ["很好", "满意", "推荐", "太差", "失望", "退货", "还行", "一般", "物流快", "包装破", "性价比高", "客服态度差"]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": i, "text": "".join(rng.choices(words, k=rng.randint(2, 12)))},
                                ensure_ascii=False) + "\n")


def run_once(model: str, rows: int, folder: Path) -> dict:
    import psutil

    src, dest = folder / f"in-{rows}.jsonl", folder / f"out-{rows}.parquet"
    write_rows(src, rows)
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "senti.cli", "predict", "--engine", "ray", "--model", model,
                             "--input", str(src), "--output", str(dest), "--id-column", "id"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(proc.pid)
    peak_sum = peak_one = 0.0
    while proc.poll() is None:
        total, largest = 0, 0
        for p in [root, *root.children(recursive=True)]:
            try:
                rss = p.memory_info().rss
            except psutil.Error:
                continue
            total, largest = total + rss, max(largest, rss)
        peak_sum, peak_one = max(peak_sum, total / 2**20), max(peak_one, largest / 2**20)
        time.sleep(0.5)
    output = proc.stdout.read() if proc.stdout else ""
    return {"rows": rows, "exit": proc.returncode, "wall_s": round(time.perf_counter() - started, 1),
            "peak_tree_rss_mb": round(peak_sum), "peak_process_rss_mb": round(peak_one),
            "said": output.strip().splitlines()[-1:] if output else []}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--rows", default="100000,1000000")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(r) for r in args.rows.split(",")):
            results.append(run_once(args.model, rows, Path(tmp)))
            print(json.dumps(results[-1], ensure_ascii=False), flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
