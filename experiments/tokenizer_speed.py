"""Tokenizer cost per text, with the Rust tokenizer's own parallelism on and off, by batch size.

    python -m experiments.tokenizer_speed --model EXPORT --dataset D [--rounds 5]

`tokenizers` runs `encode_batch` on a thread pool unless TOKENIZERS_PARALLELISM=false; the pool is fixed
when the library first encodes, so each setting runs in its own process. Prints ms per text (median of
--rounds) for batches of 1, 32 and 1,024 texts of the dataset's dev split.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

BATCHES = (1, 32, 1024)


def _measure(model: str, dataset: str, rounds: int) -> dict:
    from senti.serving import export_folder
    from senti.serving.tokenizer import FastTokenizer
    from senti.toolkit.data.splits import load_splits

    tokenizer = FastTokenizer.from_settings(Path(model), export_folder.read_meta(Path(model))[0].tokenizer)
    texts = [e.text for e in load_splits(dataset).dev]
    texts = (texts * (1 + 1024 // len(texts)))[:1024]
    tokenizer.encode_batch(texts[:64])  # warm-up (starts the pool)
    result = {}
    for size in BATCHES:
        per_round = []
        for _ in range(rounds):
            started = time.perf_counter()
            for start in range(0, len(texts), size):
                tokenizer.encode_batch(texts[start : start + size])
            per_round.append((time.perf_counter() - started) / len(texts) * 1000)
        result[str(size)] = float(np.median(per_round))
    return result


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(_measure(args.model, args.dataset, args.rounds)))
        return {}
    report = {}
    for setting in ("true", "false"):
        run = subprocess.run([sys.executable, "-m", "experiments.tokenizer_speed", "--model", args.model,
                              "--dataset", args.dataset, "--rounds", str(args.rounds), "--child"],
                             env={**os.environ, "TOKENIZERS_PARALLELISM": setting}, capture_output=True, text=True)
        report[setting] = json.loads(run.stdout.strip().splitlines()[-1])
    for size in BATCHES:
        print(f"batch {size}: {report['true'][str(size)]:.4f} ms/text with parallelism, "
              f"{report['false'][str(size)]:.4f} without")
    return report


if __name__ == "__main__":
    main()
