"""Paddle's matmul with and without `MKL_DEBUG_CPU_TYPE=5` on this CPU (senti sets it on AMD only).

    python -m experiments.mkl_cpu_type [--threads 2]

Each setting runs in a process of its own (MKL reads the variable once, at load); prints GFLOP/s per shape (the
best of 10 after one warm-up) for the shapes a 4l-312h training step multiplies and a square 2048.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

SHAPES = ((2560, 312, 1248), (2560, 1248, 312), (2560, 312, 312), (2048, 2048, 2048))
TIMER = """
import json, sys, time, paddle
out = {}
for m, k, n in json.loads(sys.argv[1]):
    a, b = paddle.randn([m, k]), paddle.randn([k, n])
    paddle.matmul(a, b)
    best = min((lambda t: (paddle.matmul(a, b), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(10))
    out[f"{m}x{k}x{n}"] = round(2 * m * k * n / best / 1e9)
print(json.dumps(out))
"""


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    from senti.core.runtime import cpu_info

    results = {"cpu": cpu_info()["model"], "flags": cpu_info()["flags"]}
    for setting in ("unset", "5"):
        env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)}
        env.pop("MKL_DEBUG_CPU_TYPE", None)
        if setting != "unset":
            env["MKL_DEBUG_CPU_TYPE"] = setting
        done = subprocess.run([sys.executable, "-c", TIMER, json.dumps(SHAPES)], env=env, capture_output=True, text=True, check=True)
        results[f"MKL_DEBUG_CPU_TYPE={setting}"] = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
