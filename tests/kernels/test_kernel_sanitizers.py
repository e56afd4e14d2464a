"""senti's C kernels under AddressSanitizer and UndefinedBehaviorSanitizer: kernels.c and a driver that calls every
kernel on small odd shapes (kernels_under_sanitizers.c), built with -fsanitize=address,undefined and run. With
SENTI_REQUIRE_KERNELS (CI) a machine that cannot build it fails instead of skipping."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from senti.core.runtime import paddle_mkl_path
from senti.kernels import build, native

DRIVER = Path(__file__).with_name("kernels_under_sanitizers.c")
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer", "-g", "-O1"]


def _compiler() -> list[str]:
    command = shlex.split(os.environ.get("CC") or "cc")
    if shutil.which(command[0]) is None or paddle_mkl_path() is None:
        if native.kernels_required():
            pytest.fail(f"SENTI_REQUIRE_KERNELS is set and {command[0]!r} or Paddle's MKL is missing")
        pytest.skip("no C compiler or no MKL in this Paddle wheel")
    return command


def test_every_kernel_runs_clean_under_address_and_undefined_behaviour_sanitizers(tmp_path):
    command, mkl = _compiler(), paddle_mkl_path()
    program = tmp_path / "kernels-sanitized"
    argv = [*command, *SANITIZE, "-fopenmp-simd", str(build.SOURCE), str(DRIVER), "-o",
            str(program), f"-L{mkl.parent}", f"-l:{mkl.name}", f"-Wl,-rpath,{mkl.parent}", "-lmvec", "-lm"]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and "asan" in built.stderr.lower() and not native.kernels_required():
        pytest.skip(f"this compiler has no sanitizer runtime: {built.stderr.strip().splitlines()[-1]}")
    assert built.returncode == 0, built.stderr[-2000:]
    env = {**os.environ, "LD_LIBRARY_PATH": str(mkl.parent),  # MKL finds its libiomp5 there
           "ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "print_stacktrace=1"}
    ran = subprocess.run([str(program)], capture_output=True, text=True, timeout=300, env=env)
    assert ran.returncode == 0 and ran.stdout.strip() == "ok", ran.stderr[-3000:]
    assert "runtime error" not in ran.stderr, ran.stderr[-3000:]  # UBSan's reports
