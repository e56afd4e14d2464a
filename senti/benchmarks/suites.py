"""The bench suites, by name: each a module with `run(ctx) -> records` and `report(results) -> markdown lines`.

train (training and the pretraining step), infer (every backend), serve (in process against `senti serve`),
ray (`senti predict --engine ray`), peer (PyTorch + transformers, same shape). The order is the order they run
and report in. Its own module so that the runner and the report both read it without importing each other.
"""

from __future__ import annotations

import importlib

SUITES = {
    "train": "senti.benchmarks.train_bench",
    "infer": "senti.benchmarks.infer",
    "serve": "senti.benchmarks.serve_load",
    "ray": "senti.benchmarks.ray_load",
    "peer": "senti.benchmarks.peer",
}


def suite_module(name: str):
    return importlib.import_module(SUITES[name])
