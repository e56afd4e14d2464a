"""Teacher against distilled student per text, same backend, same batches, one run.

    python -m experiments.student_speed --teacher T --student S --dataset D [--backends onnx,onnx-int8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--teacher", required=True)
    parser.add_argument("--student", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--backends", default="onnx,onnx-int8")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--work", default="runs/student_speed")
    args = parser.parse_args(argv)

    from senti.core.runtime import configure_runtime

    runtime = configure_runtime(args.threads)
    from senti.benchmarks.infer import bench_real_texts, open_backends
    from senti.benchmarks.models import resolve_model
    from senti.serving import export_folder
    from senti.serving.tokenizer import FastTokenizer
    from senti.toolkit.data.splits import load_splits
    from senti.toolkit.logs import quiet_libraries

    quiet_libraries()
    splits = load_splits(args.dataset)
    rows = splits.dev[: args.texts]
    texts = [e.text for e in rows]
    work = Path(args.work)
    results: dict[tuple[str, str], list[dict]] = {}
    # Interleave: each repeat times teacher then student, so drift on a noisy machine hits both alike.
    exports = {}
    for role, checkpoint in (("teacher", args.teacher), ("student", args.student)):
        _, export_dir, _ = resolve_model(checkpoint, work / role, [e.text for e in splits.train], splits.labels,
                                         [e.label for e in splits.train], say=print)
        exports[role] = export_dir
    for _repeat in range(3):
        for role, export_dir in exports.items():
            meta = export_folder.read_meta(export_dir)[0]
            backends = open_backends(export_dir, None, args.backends.split(","), int(runtime.omp_num_threads or 1))
            gold = np.array([meta.labels.index(e.label) for e in rows])
            tokenizer = FastTokenizer.from_settings(export_dir, meta.tokenizer)
            for r in bench_real_texts(backends, tokenizer, texts, gold, meta.max_seq_len, [args.batch_size],
                                      repeats=2, budget_s=60):
                results.setdefault((role, r["backend"]), []).append(r)
    summary = {"runtime": runtime, "texts": len(texts), "batch_size": args.batch_size, "backends": {}}
    for backend in args.backends.split(","):
        per_text = {role: float(np.median([1000 / r["model_texts_per_s"] for r in results[(role, backend)]]))
                    for role in ("teacher", "student")}
        summary["backends"][backend] = {
            "teacher_ms_per_text": per_text["teacher"], "student_ms_per_text": per_text["student"],
            "speedup": per_text["teacher"] / per_text["student"],
            "teacher_accuracy": results[("teacher", backend)][0]["accuracy"],
            "student_accuracy": results[("student", backend)][0]["accuracy"],
        }
    print(json.dumps(summary, indent=1))
    return summary


if __name__ == "__main__":
    main()
