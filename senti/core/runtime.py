"""CPU runtime settings that must be chosen before `paddle` (or onnxruntime) starts its thread pools."""

from __future__ import annotations

import math
import os
import platform
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from senti.core.artifacts import Record

# The CPU features that rank senti's kernels: AVX-512 and AVX2 for fp32, VNNI (AVX-512 or AVX) and AMX for INT8.
# Without VNNI an INT8 model is no faster than fp32 (measured on an AMD EPYC without it).
RECORDED_FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8", "amx_bf16")
INT8_FLAGS = ("avx512_vnni", "avx_vnni", "amx_int8")


@lru_cache(maxsize=4)
def cpu_info(cpuinfo: str = "/proc/cpuinfo") -> dict:
    """Vendor, model name and the RECORDED_FLAGS present, from /proc/cpuinfo (empty where unavailable)."""
    vendor = model = ""
    flags: set[str] = set()
    try:
        with open(cpuinfo, encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "vendor_id" and not vendor:
                    vendor = value.strip()
                elif key == "model name" and not model:
                    model = value.strip()
                elif key == "flags" and not flags:
                    flags = set(value.split())
                if vendor and model and flags:
                    break
    except OSError:
        pass
    return {"vendor": vendor, "model": model or platform.processor(), "machine": platform.machine(),
            "flags": [f for f in RECORDED_FLAGS if f in flags]}


def int8_is_fast(flags: list[str] | None = None) -> bool:
    """Whether this CPU has an INT8 dot-product instruction (VNNI or AMX), the measured condition for INT8 to beat
    fp32 here; `flags` as cpu_info gives them (default: this machine's)."""
    return any(f in INT8_FLAGS for f in (cpu_info()["flags"] if flags is None else flags))


CGROUP_ROOT = "/sys/fs/cgroup"


def available_cores() -> int:
    """Cores this process may use: the CPUs it may run on (taskset, container CPU sets), and no more than its
    cgroup's CPU quota (a container's `--cpus 2` on a 64-core host means 2), rounded up."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_cpu_quota()
    return max(1, min(cores, math.ceil(quota))) if quota else cores


def cgroup_cpu_quota(root: str | None = None) -> float | None:
    """CPUs' worth of time the cgroup allows (cgroup v2 `cpu.max`, else v1's CFS quota), None when unlimited."""
    root = root or CGROUP_ROOT
    try:
        quota, period = open(os.path.join(root, "cpu.max"), encoding="ascii").read().split()[:2]
    except (OSError, ValueError):
        try:
            quota = open(os.path.join(root, "cpu", "cpu.cfs_quota_us"), encoding="ascii").read().strip()
            period = open(os.path.join(root, "cpu", "cpu.cfs_period_us"), encoding="ascii").read().strip()
        except OSError:
            return None
    try:
        value = int(quota) / int(period)
    except ValueError:  # "max": no quota
        return None
    return value if value > 0 else None


def verbose() -> bool:
    """SENTI_VERBOSE=1 (or `senti --verbose`): show the libraries' own logs, which senti hides by default."""
    return os.environ.get("SENTI_VERBOSE", "") not in ("", "0")


def import_paddle():
    """`import paddle`, without the warning its import prints whenever OMP_NUM_THREADS > 1 (advice for
    data-parallel jobs; senti sets the threads on purpose). Shown with SENTI_VERBOSE=1."""
    import contextlib
    import io

    if "paddle" in sys.modules or verbose():
        import paddle
    else:
        hidden = io.StringIO()
        with contextlib.redirect_stderr(hidden):
            import paddle
        _unhide_log_handlers(hidden)
    return paddle


def _unhide_log_handlers(hidden) -> None:
    """Paddle's import adds a StreamHandler to the root logger bound to the stream of that moment: the buffer its
    warning was hidden in, where every later warning of senti's (the C kernels off, a failed reload) vanished. Such
    handlers write to the real stderr again."""
    import logging

    for logger in (logging.getLogger(), *(v for v in logging.Logger.manager.loggerDict.values()
                                           if isinstance(v, logging.Logger))):
        for handler in logger.handlers:
            if isinstance(handler, logging.StreamHandler) and handler.stream is hidden:
                handler.setStream(sys.stderr)


def paddle_library(name: str) -> Path | None:
    """A library inside Paddle's wheel (`paddle/libs/NAME`), or None where the wheel has none."""
    import paddle

    path = Path(paddle.__file__).parent / "libs" / name
    return path if path.exists() else None


def paddle_mkl_path() -> Path | None:
    """The MKL library inside Paddle's wheel, or None where the wheel has none (a GPU or ARM build)."""
    return paddle_library("libmklml_intel.so")


def paddle_dnnl_path() -> Path | None:
    """The oneDNN library inside Paddle's wheel (its bfloat16 GEMM trains `--amp` on a CPU), or None."""
    return paddle_library("libdnnl.so.3")


@lru_cache(maxsize=1)
def paddle_mkl():
    """`paddle_mkl_path()` loaded by ctypes, or None."""
    import ctypes

    path = paddle_mkl_path()
    return ctypes.CDLL(str(path)) if path is not None else None


@lru_cache(maxsize=1)
def paddle_openmp():
    """The OpenMP runtime inside Paddle's wheel (libs/libiomp5.so) loaded by ctypes, or None. oneDNN's threads are
    its threads too: Paddle's libiomp5 serves the OpenMP calls of the oneDNN beside it."""
    import ctypes

    path = paddle_library("libiomp5.so")
    return ctypes.CDLL(str(path)) if path is not None else None


@contextmanager
def keeping_mkl_threads():
    """Put MKL's and OpenMP's thread counts back after the block. Paddle Inference's `predictor.run()` sets the MKL
    inside Paddle's wheel, and OpenMP (the threads of its oneDNN), to one thread for the whole process (Paddle 3.3.1),
    so that every dynamic-graph matmul after it, and every bfloat16 GEMM of a CPU `--amp` run (bf16.py), ran on one
    core."""
    mkl, openmp = paddle_mkl(), paddle_openmp()
    before = mkl.MKL_Get_Max_Threads() if mkl is not None else 0
    before_openmp = openmp.omp_get_max_threads() if openmp is not None else 0
    try:
        yield
    finally:
        if before:
            mkl.MKL_Set_Num_Threads(before)
        if before_openmp:
            openmp.omp_set_num_threads(before_openmp)


def configure_runtime(threads: int | None = None) -> RuntimeRecord:
    """Set thread counts and, on AMD, MKL's fast code path; return the settings for the record.

    Paddle's CPU kernels use one OpenMP thread unless told otherwise, and the MKL inside
    the Paddle wheel picks a slow path on AMD processors unless `MKL_DEBUG_CPU_TYPE=5` is set
    before it loads. Both are read once, at import, so this must run before `import paddle`.
    A value the user already exported wins over our default, except an explicit `threads`.
    """
    global _applied_before_paddle
    before_paddle = "paddle" not in sys.modules
    in_force = {key: os.environ.get(key) for key in _RUNTIME_VARIABLES}
    n = threads or int(os.environ.get("OMP_NUM_THREADS", 0)) or available_cores()
    os.environ["OMP_NUM_THREADS"] = str(n)
    os.environ.setdefault("MKL_NUM_THREADS", str(n))
    info = cpu_info()
    if info["vendor"] == "AuthenticAMD":
        os.environ.setdefault("MKL_DEBUG_CPU_TYPE", "5")
    # A command sets these before paddle loads, and its training step calls again after: a call that changes
    # nothing keeps the first call's answer, since the settings paddle read are the ones in force.
    changed = any(os.environ.get(key) != value for key, value in in_force.items())
    if before_paddle or changed or _applied_before_paddle is None:
        _applied_before_paddle = before_paddle
    if not verbose():  # Paddle's C++ glog INFO/WARNING lines ("W1203 ... eager_utils.cc"); errors still show
        os.environ.setdefault("GLOG_minloglevel", "2")
    return runtime_record()


@dataclass
class RuntimeRecord(Record):
    """The runtime settings in force, for metrics and benchmark records."""

    cpu_model: str | None
    cpu_vendor: str | None
    cpu_flags: list[str]  # of RECORDED_FLAGS: figures rank differently with and without them
    cores: int
    omp_num_threads: str | None
    mkl_num_threads: str | None
    mkl_debug_cpu_type: str | None
    # False: paddle was imported first, so the settings above may not have taken effect.
    set_before_paddle_import: bool | None


def runtime_record() -> RuntimeRecord:
    """The runtime settings in force, for metrics and benchmark records."""
    info = cpu_info()
    return RuntimeRecord(cpu_model=info["model"], cpu_vendor=info["vendor"], cpu_flags=info["flags"],
                         cores=available_cores(), omp_num_threads=os.environ.get("OMP_NUM_THREADS"),
                         mkl_num_threads=os.environ.get("MKL_NUM_THREADS"),
                         mkl_debug_cpu_type=os.environ.get("MKL_DEBUG_CPU_TYPE"),
                         set_before_paddle_import=_applied_before_paddle)


_applied_before_paddle: bool | None = None  # None: configure_runtime was never called
_RUNTIME_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_DEBUG_CPU_TYPE")


# The distributions whose versions every artifact and measurement records (the one list).
RECORDED_PACKAGES = ("senti", "paddlepaddle", "paddlepaddle-gpu", "paddlenlp", "paddle2onnx", "onnx", "onnxruntime",
                     "onnxruntime-gpu", "tokenizers", "ray")


def package_versions(names=RECORDED_PACKAGES) -> dict:
    """Installed versions of the named distributions (default: RECORDED_PACKAGES); missing ones are left out."""
    import importlib.metadata as md

    found = {}
    for name in names:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return found


def die_with_parent(signum: int, parent_pid: int = 0) -> None:
    """Have the kernel send `signum` to this process when its parent ends, however it ends (Linux's
    PR_SET_PDEATHSIG; elsewhere nothing). `parent_pid`: the parent expected; if it is already gone (it died before
    this call), end now."""
    import ctypes
    import ctypes.util
    import signal as signals
    import sys

    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signum, 0, 0, 0)
    if parent_pid and os.getppid() != parent_pid:
        signals.raise_signal(signum)
