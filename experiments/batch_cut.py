"""How much cutting mixed-length batches by padding cost helps, on batches shaped like a server's.

    python -m experiments.batch_cut --model EXPORT_OR_SHAPE --dataset D [--costs none,64,96,128,192]

A server's batch is whatever arrived together: random texts, not length-sorted ones. This draws
random 32-text mixes of dev texts and scores them with each `call_cost_tokens` in interleaved
rounds, reporting the median throughput of each (serving.predictor.CPU_CALL_COST_TOKENS is the
value this chose).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="4l-312h", help="an export folder, or a shape for random weights")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--costs", default="none,64,96,128,192")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--backend", default="onnx")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--work", default="runs/batch_cut")
    args = parser.parse_args(argv)

    from senti.core.runtime import configure_runtime

    runtime = configure_runtime(args.threads)
    from senti.benchmarks.models import resolve_model
    from senti.core import layout
    from senti.serving.predictor import Predictor
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.logs import quiet_libraries

    quiet_libraries()
    splits = load_splits(args.dataset)
    export_dir = Path(args.model)
    if not (export_dir / layout.EXPORT_META).is_file():
        texts = [e.text for e in splits.train]
        _, export_dir, _ = resolve_model(args.model, Path(args.work), texts, splits.labels,
                                         [e.label for e in splits.train], say=print)
    predictor = Predictor.load(export_dir, backend=args.backend, threads=args.threads)
    dev = [e.text for e in splits.dev]
    rng = np.random.default_rng(0)
    mixes = [[dev[i] for i in rng.choice(len(dev), args.batch_size, replace=False)] for _ in range(args.batches)]
    costs = [None if c == "none" else int(c) for c in args.costs.split(",")]
    rates: dict[str, list[float]] = {str(c): [] for c in costs}
    for _ in range(args.rounds):  # interleaved, so a slow moment of the machine hits every setting
        for cost in costs:
            predictor.call_cost_tokens = cost
            started = time.perf_counter()
            for mix in mixes:
                predictor.logits(mix, args.batch_size)
            rates[str(cost)].append(args.batches * args.batch_size / (time.perf_counter() - started))
    result = {"runtime": runtime, "export": str(export_dir), "backend": args.backend,
              "texts_per_s_median": {c: float(np.median(v)) for c, v in rates.items()}, "texts_per_s": rates}
    for cost, rate in result["texts_per_s_median"].items():
        print(f"call_cost_tokens {cost:>5}: {rate:6.1f} texts/s (median of {args.rounds} rounds)")
    return result


if __name__ == "__main__":
    print(json.dumps(main()["texts_per_s_median"]))
