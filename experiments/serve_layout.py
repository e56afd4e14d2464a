"""`senti serve` with its default layout against another build's default, same exports, interleaved rounds.

    python -m experiments.serve_layout --model EXPORT [--model EXPORT2] --dataset D
        [--before-tree DIR] [--layout 2x1 ...] [--rounds 3] [--requests 1000] [--output FILE.json]

Each round, for each export: the in-process Predictor on the texts the clients send (ONNX Runtime spinning off,
as the server runs it; all cores), then each build's `senti serve` with no --workers/--threads (its own
default) under the serve suite's load (32 loopback clients, requests of 4 texts, load generator in its own
process). CPU efficiency = CPU-seconds per text in process / CPU-seconds per text of the server's process tree;
medians over the rounds. `--before-tree` is a checkout of an older senti (with the `senti` namespace), run with
PYTHONPATH set to it. `--layout WxT` (repeatable) also runs this build with W workers of T threads each, to
weigh the default's choice against another.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

Build = tuple[list[str], dict | None, str | None]  # serve command, environment, working folder


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", required=True, help="an export folder (repeat)")
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--before-tree", default=None)
    parser.add_argument("--layout", action="append", default=[], help="WxT: also W workers x T threads (repeat)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--output", default=None)
    args = parser.parse_args(argv)
    from senti.benchmarks.serve_load import Load, Server, in_process, through_server
    from senti.core.runtime import available_cores, cpu_info
    from senti.toolkit.data.splits import load_splits

    cores = available_cores()
    texts = [e.text for e in load_splits(args.dataset).dev][:256]
    load = Load(clients=32, requests=args.requests, texts_per_request=4)
    sent = [texts[(n * 4 + k) % len(texts)] for n in range(args.requests) for k in range(4)]
    builds: dict[str, Build] = {"this build": ([sys.executable, "-m", "senti.cli", "serve"], None, None)}
    if args.before_tree:
        builds["before"] = ([sys.executable, "-m", "senti.cli", "serve"],
                            {**os.environ, "PYTHONPATH": args.before_tree}, args.before_tree)
    layouts = {spec: tuple(int(n) for n in spec.lower().split("x")) for spec in args.layout}
    runs: dict = {str(m): {"in_process": [], **{b: [] for b in [*builds, *layouts]}} for m in args.model}
    for round_ in range(args.rounds):
        for model in args.model:
            model = str(Path(model).resolve())
            key = next(k for k in runs if str(Path(k).resolve()) == model)
            direct = in_process(Path(model), sent, 32, cores, repeats=1)
            runs[key]["in_process"].append(direct)
            for name in [*builds, *layouts]:
                if name in builds:
                    command, env, cwd = builds[name]
                    served = through_server(Path(model), texts, cores, load,
                                            Server(serve_command=command, env=env, cwd=cwd, default_layout=True))
                else:
                    workers, threads = layouts[name]
                    served = through_server(Path(model), texts, workers * threads, load, Server(workers=workers))
                served["cpu_efficiency"] = direct["cpu_s_per_text"] / served["server_cpu_s_per_text"]
                runs[key][name].append(served)
                print(f"round {round_ + 1} {Path(model).name} {name}: efficiency {served['cpu_efficiency']:.3f}, "
                      f"{served['texts_per_s']:.0f} texts/s (in process {direct['texts_per_s']:.0f}), padding "
                      f"{served.get('padding_share')}", flush=True)
    summary: dict[str, Any] = {"cpu": cpu_info(), "cores": cores, "models": {}}
    for key, entry in runs.items():
        summary["models"][key] = {name: {
            "cpu_efficiency": statistics.median(r["cpu_efficiency"] for r in records),
            "texts_per_s": statistics.median(r["texts_per_s"] for r in records),
            "rounds": [round(r["cpu_efficiency"], 3) for r in records]}
            for name, records in entry.items() if name != "in_process"}
        summary["models"][key]["in_process"] = {
            "texts_per_s": statistics.median(r["texts_per_s"] for r in entry["in_process"]),
            "cpu_ms_per_text": 1e3 * statistics.median(r["cpu_s_per_text"] for r in entry["in_process"]),
            "padding_share": statistics.median(r["padding_share"] for r in entry["in_process"])}
    print(json.dumps(summary, indent=1))
    if args.output:
        Path(args.output).write_text(json.dumps({"summary": summary, "runs": runs}, indent=1), encoding="utf-8")
    return summary


if __name__ == "__main__":
    main()
