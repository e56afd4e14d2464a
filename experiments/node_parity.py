"""The same export scored by senti.serving (Python) and by examples/node (Node.js): labels and probabilities.

    python -m experiments.node_parity --model EXPORT --dataset chnsenticorp/ [--split test] [--format onnx]

Installs the Node example's locked dependencies into a temporary copy (npm ci), scores the split's texts one at a
time in both, and prints how many labels agree and the largest probability difference.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "node"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="an export folder")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--split", default="test")
    parser.add_argument("--format", default="onnx")
    args = parser.parse_args(argv)
    from senti.serving import Predictor
    from senti.toolkit.data.splits import load_splits

    texts = [row.text for row in getattr(load_splits(args.dataset), args.split)]
    predictor = Predictor.load(args.model, backend=args.format, threads=1)
    python = predictor.predict(texts, batch_size=1)
    with tempfile.TemporaryDirectory() as folder:
        for name in ("package.json", "package-lock.json", ".npmrc", "scorer.mjs", "senti.mjs", "cli.mjs"):
            shutil.copy(EXAMPLE / name, Path(folder) / name)
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=folder, check=True, capture_output=True)
        done = subprocess.run(["node", str(Path(folder) / "cli.mjs"), str(args.model), "--format", args.format],
                              input="".join(json.dumps(t, ensure_ascii=False) + "\n" for t in texts),
                              capture_output=True, text=True, check=True)
    node = [json.loads(line) for line in done.stdout.splitlines()]
    got = np.array([[a["probabilities"][lab] for lab in predictor.labels] for a in node])
    want = np.array([[p.probabilities[lab] for lab in predictor.labels] for p in python])
    report = {"texts": len(texts), "labels_equal": sum(a["label"] == p.label for a, p in zip(node, python)),
              "max_abs_probability_diff": float(np.abs(got - want).max()), "format": args.format}
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
