"""In-process Predictor speed of this build against an older source tree, interleaved rounds, one run.

    python -m experiments.inprocess_ab --model EXPORT --dataset D --before-tree DIR [--backend onnx]
        [--rounds 5] [--before-package senti.serving]

Each build scores the same texts (4,000, the serve suite's) in its own process per round, so neither warms the
other's caches; prints median texts/s and CPU ms per text of each.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

SCRIPT = """
import json, sys, time
sys.path.insert(0, {tree!r})
from {package} import Predictor
texts = json.load(open({texts!r}, encoding="utf-8"))
p = Predictor.load({model!r}, backend={backend!r}, threads=2)
p.predict(texts[:32], batch_size=32)
w, c = time.perf_counter(), time.process_time()
p.predict(texts, batch_size=32)
print(json.dumps({{"texts_per_s": len(texts) / (time.perf_counter() - w), "cpu_ms": 1000 * (time.process_time() - c) / len(texts)}}))
"""


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--before-tree", required=True)
    parser.add_argument("--backend", default="onnx")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--before-package", default="serving",
                        help="where the old tree's Predictor lives: serving (before the namespace) or senti.serving")
    args = parser.parse_args(argv)
    import tempfile

    from senti.toolkit.data.splits import load_splits

    texts = [e.text for e in load_splits(args.dataset).dev][:256]
    sent = [texts[(n * 4 + k) % len(texts)] for n in range(1000) for k in range(4)]
    results: dict[str, list] = {"before": [], "this build": []}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as fh:
        json.dump(sent, fh, ensure_ascii=False)
    builds = {"before": (args.before_tree, args.before_package, args.before_tree), "this build": ("", "senti.serving", None)}
    for _ in range(args.rounds):
        for name, (tree, package, cwd) in builds.items():
            code = SCRIPT.format(tree=tree, package=package, texts=fh.name, model=os.path.abspath(args.model),
                                 backend=args.backend)
            run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd)
            results[name].append(json.loads(run.stdout.strip().splitlines()[-1]))
    os.unlink(fh.name)
    summary = {name: {"texts_per_s": float(np.median([r["texts_per_s"] for r in rs])),
                      "cpu_ms_per_text": float(np.median([r["cpu_ms"] for r in rs]))} for name, rs in results.items()}
    print(json.dumps(summary))
    return summary


if __name__ == "__main__":
    main()
