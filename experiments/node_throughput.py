"""Throughput of the Node.js example against senti.serving on the same texts and threads, for the embedding page.

    python -m experiments.node_throughput --model EXPORT --dataset D [--split dev] [--format onnx-int8-static]
        [--rounds 3] [--example examples/node]

Python: `Predictor.load(EXPORT, backend=FORMAT, threads=1).predict(texts)` (batches of 32, length-sorted), timed
in process (wall and process CPU). Node: `node cli.mjs EXPORT --format FORMAT` (one text per call, one thread),
run with the texts and with one text; the difference is the scoring (loading and the parity check cancel), wall
and the child's CPU. Rounds alternate; medians printed. The example's dependencies must be installed (npm ci).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import time
from pathlib import Path


def _node_run(example: Path, export: str, fmt: str, texts: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of the example's CLI on `texts`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(["node", str(example / "cli.mjs"), export, "--format", fmt], capture_output=True, text=True,
                          input="".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts), check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert len(done.stdout.splitlines()) == len(texts)
    return wall, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--split", default="dev")
    parser.add_argument("--format", default="onnx-int8-static")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--example", default="examples/node")
    args = parser.parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime(1)
    from senti.serving import Predictor
    from senti.toolkit.data.splits import load_splits

    texts = [e.text for e in load_splits(args.dataset).split(args.split)]
    predictor = Predictor.load(args.model, backend=args.format, threads=1)
    rows = []
    for _ in range(args.rounds):
        cpu, started = time.process_time(), time.perf_counter()
        predictor.predict(texts)
        python = (time.perf_counter() - started, time.process_time() - cpu)
        full = _node_run(Path(args.example), args.model, args.format, texts)
        one = _node_run(Path(args.example), args.model, args.format, texts[:1])
        node = (full[0] - one[0], full[1] - one[1])
        rows.append({"python_texts_per_s": len(texts) / python[0], "python_cpu_ms_per_text": 1000 * python[1] / len(texts),
                     "node_texts_per_s": (len(texts) - 1) / node[0],
                     "node_cpu_ms_per_text": 1000 * node[1] / (len(texts) - 1)})
        print(json.dumps(rows[-1]), flush=True)
    report = {"texts": len(texts), "format": args.format, "threads": 1, "rounds": rows,
              "median": {k: statistics.median(r[k] for r in rows) for k in rows[0]}}
    print(json.dumps(report["median"]))
    return report


if __name__ == "__main__":
    main()
