"""CPU-seconds of exports scoring the same texts, interleaved in one process (what the n-gram head costs).

    python -m experiments.head_cost --model runs/s5/export-distill --model runs/s6/export-H
        [--dataset ../shared/data/chnsenticorp] [--split dev] [--backend onnx-int8-static] [--rounds 5]

Process CPU time, not wall time, so other jobs on a shared machine do not count; one thread per model; the
median of the rounds, each round scoring every text with every model in turn.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="an export folder (repeat)")
    parser.add_argument("--dataset", default="../shared/data/chnsenticorp")
    parser.add_argument("--split", default="dev")
    parser.add_argument("--backend", default="onnx-int8-static")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    from senti.serving import Predictor
    from senti.toolkit.data.splits import load_splits

    texts = [e.text for e in load_splits(args.dataset).split(args.split)]
    models = {path: Predictor.load(path, backend=args.backend, threads=1) for path in args.model}
    seconds: dict[str, list[float]] = {path: [] for path in models}
    for _ in range(args.rounds):
        for path, predictor in models.items():
            started = time.process_time()
            predictor.predict(texts, batch_size=32)
            seconds[path].append(time.process_time() - started)
    report: dict[str, dict[str, Any]] = {path: {"median_cpu_s": statistics.median(s), "rounds": s} for path, s in seconds.items()}
    for path, record in report.items():
        print(f"{path}: median {record['median_cpu_s']:.3f} CPU-s for {len(texts)} texts "
              f"({', '.join(f'{s:.3f}' for s in record['rounds'])})")
    return report


if __name__ == "__main__":
    main()
