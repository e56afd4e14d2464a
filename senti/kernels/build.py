"""How senti's C kernels (kernels.c) are compiled: one rule for the build at install (setup.py) and the build on
first use (native.py). The standard library only, so setup.py can run it before Paddle is installed.

No `-march=native`: kernels.c clones each kernel for x86-64-v4, v3 and the baseline and the loader picks the one
this CPU runs, so a library built on one machine runs on another. The library links to no MKL: native.py hands it
the address of the batched sgemm in Paddle's wheel (`senti_use_gemm`)."""

from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
from pathlib import Path

SOURCE = Path(__file__).with_name("kernels.c")
FLAGS = ["-O3", "-fopenmp-simd", "-shared", "-fPIC"]
LIBRARIES = ["-lmvec", "-lm"]  # glibc's vector erff and expf


def source_digest(source: Path = SOURCE) -> str:
    """What a library built from `source` answers to `senti_source_digest()`."""
    return hashlib.sha256(source.read_bytes()).hexdigest()[:16]


def compiler() -> list[str]:
    """`$CC` (which may carry flags, "gcc -O2", as make's does), else `cc`. Raises RuntimeError when not on PATH."""
    command = shlex.split(os.environ.get("CC") or "cc") or ["cc"]
    if shutil.which(command[0]) is None:
        raise RuntimeError(f"no C compiler ({command[0]!r} not found on PATH)")
    return command


def compile_library(output: Path, source: Path = SOURCE) -> None:
    """Compile `source` into the shared library `output`. Raises RuntimeError with the compiler's first error line."""
    argv = [*compiler(), *FLAGS, f'-DSENTI_SOURCE_DIGEST="{source_digest(source)}"', str(source), "-o",
            str(output), *LIBRARIES]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:200])
        raise RuntimeError(f"building {source.name} failed: {first}")
