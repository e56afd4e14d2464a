"""Where `senti serve`'s CPU goes, and what a change did: this build against another one, same model, one run.

    python -m experiments.serve_profile --model EXPORT --dataset D [--before-tree DIR] [--py-spy PATH]

For each build: CPU-seconds per text of the server's process tree (the serve suite's harness: 32 loopback
clients, requests of 4 texts, load generator in its own process) against the in-process Predictor, and with
--py-spy the top functions by own time (sampled under the same load). `--before-tree` is a source checkout
of an older senti whose CLI is `python -m toolkit.cli` (before the `senti` namespace); both use --backend onnx.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

Build = tuple[list[str], dict | None, str | None]  # serve command, environment, working folder


def _top_functions(raw: Path, n: int = 5) -> list[tuple[str, float]]:
    """Own-time shares of the leaf frames in py-spy's collapsed ("raw") output."""
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        own[stack.split(";")[-1]] += int(count)
        total += int(count)
    return [(frame, c / total) for frame, c in own.most_common(n)] if total else []


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--before-tree", default=None)
    parser.add_argument("--py-spy", default=None)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    from senti.core.runtime import configure_runtime

    configure_runtime(args.threads)
    from senti.benchmarks.serve_load import Load, Server, in_process, through_server
    from senti.toolkit.data.splits import load_splits

    texts = [e.text for e in load_splits(args.dataset).dev][:256]
    load = Load(clients=32, requests=args.requests, texts_per_request=4)
    sent = [texts[(n * 4 + k) % len(texts)] for n in range(args.requests) for k in range(4)]
    builds: dict[str, Build] = {"this build": ([sys.executable, "-m", "senti.cli", "serve", "--backend", "onnx", "--no-ort-spinning"],
                             None, None)}
    if args.before_tree:  # run from inside the old tree, so its bare `toolkit` package is the one imported
        builds["before"] = ([sys.executable, "-m", "toolkit.cli", "serve", "--backend", "onnx"],
                            {**os.environ, "PYTHONPATH": args.before_tree}, args.before_tree)
    report = {"in_process": in_process(Path(args.model), sent, 32, args.threads), "builds": {}}
    report["in_process"]["note"] = "backend " + report["in_process"]["backend"]
    model = Path(args.model).resolve()
    for name, (command, env, cwd) in builds.items():
        served = through_server(model, texts, args.threads, load, Server(serve_command=command, env=env, cwd=cwd))
        entry = {"server": served, "cpu_efficiency": report["in_process"]["cpu_s_per_text"] / served["server_cpu_s_per_text"]}
        if args.py_spy:
            with tempfile.TemporaryDirectory() as tmp:
                raw = Path(tmp) / "profile.txt"

                def profiler(pid):
                    return subprocess.Popen([args.py_spy, "record", "--pid", str(pid), "--duration", "15", "--rate", "200",
                                             "--format", "raw", "--output", str(raw), "--nonblocking"],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

                through_server(model, texts, args.threads, replace(load, requests=4 * args.requests),
                               Server(serve_command=command, env=env, cwd=cwd, while_loaded=profiler))
                entry["top_own_time"] = _top_functions(raw) if raw.is_file() else []
        report["builds"][name] = entry
        print(json.dumps({name: {"cpu_efficiency": entry["cpu_efficiency"], "texts_per_s": served["texts_per_s"],
                                 "top_own_time": entry.get("top_own_time")}}, ensure_ascii=False))
    return report


if __name__ == "__main__":
    main()
