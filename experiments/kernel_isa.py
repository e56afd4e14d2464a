"""senti's C kernels built as they ship (each kernel cloned for x86-64-v4, v3 and the baseline, the clone picked at
load) against the same source built for this machine alone (`-march=native`, one version), operator by operator.

    python -m experiments.kernel_isa [--threads 2] [--rounds 3] [--generic-tune]

The operators and shapes of `experiments.op_speed` (senti's column: batch 32 x 128 tokens, 312 wide, 1,248 inside
the FFN, 12 heads; forward and backward through a sum). In each round every operator is timed with one library and
then the other (which goes first rotates; median of 20 runs after 3 warm-ups, ms); the table gives the median
over rounds and the ratio. The last row is a whole forward and backward of a 4l-312h ERNIE (batch 32 x 128
tokens, senti's CPU kernels switched in; median of 5).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path


def _libraries(folder: Path, generic_tune: bool = False) -> dict:
    """{"clones": library, "-march=native": library}, both from senti/kernels/kernels.c, opened as senti opens it;
    with `generic_tune` also "-mtune=generic" (this CPU's instructions, tuned for no CPU in particular)."""
    from senti.kernels import build, native

    built = {}
    variants = [("clones", []), ("-march=native", ["-march=native", "-DSENTI_ISA="])]
    if generic_tune:
        variants.append(("-mtune=generic", ["-march=native", "-mtune=generic", "-DSENTI_ISA="]))
    for name, extra in variants:
        path = folder / f"{name.strip('-=')}.so"
        flags = build.FLAGS
        build.FLAGS = [*flags, *extra]  # the one compile rule, with the old target added
        try:
            build.compile_library(path)
        finally:
            build.FLAGS = flags
        built[name] = native._open(path)
    return built


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--generic-tune", action="store_true", help="also -march=native -mtune=generic")
    args = parser.parse_args(argv)
    from senti.core.runtime import configure_runtime, cpu_info, import_paddle

    configure_runtime(args.threads)
    import_paddle()
    from experiments.custom_op_dispatch import _step
    from experiments.dense_linear import median_ms
    from experiments.op_speed import senti_ops
    from senti.kernels import native

    times: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        libraries = _libraries(Path(tmp), args.generic_tune)
        for round_ in range(args.rounds):
            order = list(libraries.items())
            shift = round_ % len(order)
            for name, library in order[shift:] + order[:shift]:  # each goes first in turn
                native.load = lambda library=library: library  # type: ignore[assignment]  # the PyLayers' load()
                for op, fn in {**senti_ops(), "4l-312h step, forward and backward": _step("4l-312h")}.items():
                    times.setdefault(op, {}).setdefault(name, []).append(median_ms(fn, repeats=5 if "step" in op
                                                                                    else 20))
    rows = {op: {name: statistics.median(v) for name, v in by.items()} for op, by in times.items()}
    print(json.dumps({"cpu": cpu_info(), "threads": args.threads, "rounds": args.rounds}))
    names = list(next(iter(rows.values())))
    print("| operator | " + " | ".join(f"{n}, ms" for n in names) + " | clones / native |")
    print("|---" * (len(names) + 2) + "|")
    for op, by in rows.items():
        print(f"| {op} | " + " | ".join(f"{by[n]:.2f}" for n in names) +
              f" | {by['clones'] / by['-march=native']:.2f}x |")
    return rows


if __name__ == "__main__":
    main()
