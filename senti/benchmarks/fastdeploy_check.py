"""`make fastdeploy-check`: a senti export scored through FastDeploy's Runtime, compared with senti.serving.

    python -m senti.benchmarks.fastdeploy_check --model EXPORT [--dataset D] [--python .venv-fastdeploy/bin/python]

FastDeploy is not a dependency of senti: it runs in its own Python 3.10 environment (fastdeploy-python 1.0.7
is a CPU wheel for 3.10 only and needs numpy<2), which gets the very token ids senti's tokenizer made, in
length-sorted batches of 32; each of its CPU backends runs in its own process, so one that aborts is
reported, not fatal. Prints one line per backend and writes OUTPUT (JSON).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

WORKER = Path(__file__).resolve().parent / "fastdeploy_worker.py"
BACKENDS = ("ort", "paddle", "openvino")


def _parse(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="senti export folder")
    parser.add_argument("--dataset", default=None, help="texts (default: the export's own parity data)")
    parser.add_argument("--python", default=".venv-fastdeploy/bin/python")
    parser.add_argument("--texts", type=int, default=512)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="runs/fastdeploy_check.json")
    return parser.parse_args(argv)


def _reference(args) -> tuple[dict[str, Any], list, list]:
    """senti's side: the report's start (texts, batches, senti's ms per batch), the padded batches, their logits."""
    from senti.core.batching import length_sorted_batches, pad_batch
    from senti.serving import Predictor
    from senti.toolkit.data.splits import load_splits

    predictor = Predictor.load(Path(args.model), backend="onnx", threads=args.threads)
    recipe = predictor.meta.data
    dataset = args.dataset or (recipe.dataset if recipe else None)
    if dataset is None:
        raise SystemExit("the export does not record its data; pass --dataset")
    texts = [e.text for e in load_splits(dataset, seed=recipe.seed if recipe else 42).dev[: args.texts]]
    encoded = predictor.tokenizer(texts, predictor.max_seq_len)
    batches = [pad_batch(encoded, index, predictor.tokenizer.pad_id)[0]
               for index in length_sorted_batches([len(e) for e in encoded], 32)]
    logits, seconds = [], []
    for ids in batches:
        t0 = time.perf_counter()
        logits.append(predictor.backend(ids, np.zeros_like(ids)))
        seconds.append(time.perf_counter() - t0)
    report: dict[str, Any] = {"export": args.model, "dataset": dataset, "texts": len(texts), "batches": len(batches),
                              "senti_onnxruntime_ms_per_batch": 1000 * float(np.median(seconds)), "backends": {}}
    return report, batches, logits


def _judged(folder: Path, result: dict, senti_logits: list, batch_size: int) -> dict:
    """One FastDeploy backend's record: its logits against senti's, or why they cannot be compared."""
    logits = np.load(folder / "result.npz")
    wrong = [list(logits[f"logits_{i}"].shape) for i, ref in enumerate(senti_logits)
             if logits[f"logits_{i}"].shape != ref.shape]
    if wrong:  # FastDeploy with numpy 2 returns empty arrays without an error
        return {"ok": False, "failed": "wrong output shape",
                "last_line": f"returned shape {wrong[0]} for a batch of {batch_size} texts (numpy {result['numpy']})"}
    diffs = [float(np.abs(logits[f"logits_{i}"] - ref).max()) for i, ref in enumerate(senti_logits)]
    return {"ok": True, "max_abs_logit_diff": max(diffs), "ms_per_batch": 1000 * float(np.median(result["seconds"])),
            "numpy": result["numpy"], "fastdeploy": result["fastdeploy"]}


def _through_fastdeploy(args, batches: list, senti_logits: list) -> dict:
    """Each FastDeploy backend run on the same batches in the FastDeploy environment: {backend: record}."""
    from senti.core import layout

    export = Path(args.model)
    graph, params = layout.paddle_model_files(export / layout.PADDLE_DIR)
    records = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        arrays: dict[str, Any] = {f"ids_{i}": ids for i, ids in enumerate(batches)}
        np.savez(folder / "batches.npz", **arrays)
        (folder / "spec.json").write_text(json.dumps({
            "onnx": str((export / layout.ONNX_FILES["onnx"]).resolve()), "paddle_model": str(Path(graph).resolve()),
            "paddle_params": str(Path(params).resolve()), "threads": args.threads, "batches": len(batches)}))
        for backend in BACKENDS:
            (folder / "result.json").unlink(missing_ok=True)
            run = subprocess.run([args.python, str(WORKER), str(folder), backend], capture_output=True, text=True,
                                 timeout=600)
            if run.returncode != 0 or not (folder / "result.json").is_file():
                how = f"signal {-run.returncode}" if run.returncode < 0 else f"exit {run.returncode}"
                last = [line for line in (run.stderr or run.stdout).splitlines() if line.strip()][-1:]
                records[backend] = {"ok": False, "failed": how, "last_line": last[0][:300] if last else ""}
                continue
            result = json.loads((folder / "result.json").read_text(encoding="utf-8"))
            records[backend] = _judged(folder, result, senti_logits, len(batches[0]))
    return records


def main(argv=None) -> dict:
    args = _parse(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime(args.threads)
    report, batches, senti_logits = _reference(args)
    report["backends"] = _through_fastdeploy(args, batches, senti_logits)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"{report['texts']} dev texts of {report['dataset']}, {len(batches)} length-sorted batches of 32; senti's "
          f"ONNX Runtime: {report['senti_onnxruntime_ms_per_batch']:.1f} ms per batch (median)")
    for backend, r in report["backends"].items():
        if r["ok"]:
            print(f"FastDeploy {backend}: max |logit diff| vs senti {r['max_abs_logit_diff']:.1e}, "
                  f"{r['ms_per_batch']:.1f} ms per batch (median)")
        else:
            print(f"FastDeploy {backend}: failed ({r['failed']}): {r['last_line']}")
    return report


if __name__ == "__main__":
    main()
