"""Peak memory of `senti predict --engine ray` against the row count: does it stay flat as the input grows?

    python -m experiments.ray_memory --model EXPORT --rows 100000,1000000 [--without-ids] [--output report.json]

For each row count: a JSONL file of short synthetic reviews (with an id column unless --without-ids), then
`senti predict --engine ray --input FILE --output DIR.parquet` as a child process; every 0.5 s each process in its
tree (the driver, Ray's GCS, raylet and workers, all started by it) is read with psutil. Reports the peak of the
tree's summed RSS (shared pages counted in every process that maps them), the peak of its summed PSS (shared pages
divided among the processes that map them: the tree's real footprint), the largest single process and the three
processes whose own PSS peaked highest, the rows written and the wall time.
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


def write_rows(path: Path, n: int, with_ids: bool = True) -> None:
    rng = random.Random(0)
    words = ["很好", "满意", "推荐", "太差", "失望", "退货", "还行", "一般", "物流快", "包装破", "性价比高", "客服态度差"]
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            row: dict[str, object] = {"id": i} if with_ids else {}
            row["text"] = "".join(rng.choices(words, k=rng.randint(2, 12)))
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _name(p) -> str:
    try:
        cmd = p.cmdline()
    except Exception:  # noqa: BLE001 - a process that just ended
        return "?"
    title = " ".join(cmd)
    return (title.split("/")[-1] if title.startswith("/") else title)[:60] or p.name()


def run_once(model: str, rows: int, folder: Path, with_ids: bool = True) -> dict:
    import psutil

    src, dest = folder / f"in-{rows}.jsonl", folder / f"out-{rows}.parquet"
    write_rows(src, rows, with_ids)
    started = time.perf_counter()
    command = [sys.executable, "-m", "senti.cli", "predict", "--engine", "ray", "--model", model,
               "--input", str(src), "--output", str(dest)] + (["--id-column", "id"] if with_ids else [])
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    root = psutil.Process(proc.pid)
    peak_rss = peak_pss = peak_one = 0.0
    by_process: dict[int, tuple[str, float]] = {}
    timeline: list[tuple[float, int]] = []  # (seconds, the tree's PSS in MB) every 5 s: flat, or growing?
    while proc.poll() is None:
        rss_sum = pss_sum = largest = 0
        for p in [root, *root.children(recursive=True)]:
            try:
                info = p.memory_full_info()
            except psutil.Error:
                continue
            rss_sum, pss_sum, largest = rss_sum + info.rss, pss_sum + info.pss, max(largest, info.rss)
            name, before = by_process.get(p.pid, ("", 0.0))
            if info.pss / 2**20 > before:  # named at its peak: Ray retitles a worker by what it runs
                by_process[p.pid] = (_name(p), info.pss / 2**20)
        peak_rss, peak_pss = max(peak_rss, rss_sum / 2**20), max(peak_pss, pss_sum / 2**20)
        elapsed = time.perf_counter() - started
        if not timeline or elapsed - timeline[-1][0] >= 5:
            timeline.append((round(elapsed, 1), round(pss_sum / 2**20)))
        peak_one = max(peak_one, largest / 2**20)
        time.sleep(0.5)
    output = proc.stdout.read() if proc.stdout else ""
    top = sorted(by_process.values(), key=lambda item: -item[1])[:3]
    return {"rows": rows, "ids": with_ids, "exit": proc.returncode, "wall_s": round(time.perf_counter() - started, 1),
            "peak_tree_rss_mb": round(peak_rss), "peak_tree_pss_mb": round(peak_pss),
            "peak_process_rss_mb": round(peak_one), "top_pss_mb": [[n, round(v)] for n, v in top],
            "timeline_pss_mb": timeline,
            "said": output.strip().splitlines()[-1:] if output else []}


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--rows", default="100000,1000000")
    parser.add_argument("--without-ids", action="store_true", help="no id column: rows numbered by position")
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for rows in (int(r) for r in args.rows.split(",")):
            results.append(run_once(args.model, rows, Path(tmp), not args.without_ids))
            print(json.dumps(results[-1], ensure_ascii=False), flush=True)
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return results


if __name__ == "__main__":
    main()
