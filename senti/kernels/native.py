"""senti's C training kernels (kernels.c beside this file), called on Paddle tensors' buffers.

`load()` returns the library: the one built at install (setup.py puts it beside this file) when it is there, safe
(`unsafe`) and built from this kernels.c; else kernels.c compiled on first use with the machine's C compiler (`$CC`,
else `cc`; build.py's flags), once per source and compiler, into senti's cache folder (`$SENTI_CACHE`, else
`~/.cache/senti`). Where neither can be had it returns None and says why once, and senti trains with its Python
kernels instead (cpu_kernels.py). Either library is the project's own source, compiled by the user's own compiler:
nothing downloaded, nothing executed from the data a run reads.

The PyLayers below wrap each forward/backward pair of the library for Paddle's autograd. Every tensor handed to the
library is float32 and contiguous (made so when not); outputs are allocated by Paddle, so Paddle owns all memory.
"""

from __future__ import annotations

import atexit
import ctypes
import hashlib
import logging
import os
import shutil
import stat
import subprocess
import tempfile
from functools import lru_cache
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import numpy as np
import paddle
from paddle.autograd import PyLayer

from senti.core.runtime import paddle_mkl
from senti.kernels.build import FLAGS, compile_library, compiler, source_digest

log = logging.getLogger(__name__)

# built at install by setup.py (a setuptools extension without Python in it: ctypes loads it)
INSTALLED = Path(__file__).with_name("_senti_kernels" + EXTENSION_SUFFIXES[0])

_f = ctypes.c_void_p  # a buffer
_n = ctypes.c_int64
_i = ctypes.c_int
_x = ctypes.c_float
_u = ctypes.c_uint64
SIGNATURES = {
    "senti_use_gemm": [_f],
    "senti_dropout_fwd": [_f, _f, _f, _n, _x, _u],
    "senti_dropout_bwd": [_f, _f, _f, _n, _x],
    "senti_to_bf16": [_f, _f, _n],
    "senti_bias_add": [_f, _f, _n, _n],
    "senti_column_sum": [_f, _f, _n, _n],
    "senti_gelu_fwd": [_f, _f, _n],
    "senti_gelu_bwd": [_f, _f, _f, _n],
    "senti_layer_norm_fwd": [_f, _f, _f, _f, _f, _f, _n, _n, _x],
    "senti_layer_norm_bwd": [_f, _f, _f, _f, _f, _f, _f, _f, _n, _n],
    "senti_attention_fwd": [_f, _f, _f, _f, _f, _f, _f, _f, _f, _i, _i, _i, _i, _x, _x, _u],
    "senti_attention_bwd": [_f, _f, _f, _f, _f, _f, _f, _f, _f, _f, _f, _f, _i, _i, _i, _i, _x, _x],
}


def cache_folder() -> Path:
    return Path(os.environ.get("SENTI_CACHE") or Path.home() / ".cache" / "senti") / "kernels"


def unsafe(path: Path) -> str | None:
    """Why a cache folder or library may not be trusted, or None: it (or a folder above it) is a symbolic link,
    belongs to another user, or can be written by others (OpenSSH's and pip's rule; a folder like /tmp, writable by
    all but sticky, lets no one replace what another user made in it)."""
    uid = os.getuid()
    for i, part in enumerate([path, *path.parents]):
        try:
            st = os.lstat(part)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode) and i < 2:  # the library and its folder; a linked home above is the admin's
            return f"{part} is a symbolic link"
        if stat.S_ISLNK(st.st_mode):
            st = os.stat(part)
        if st.st_uid not in (uid, 0):
            return f"{part} belongs to another user (uid {st.st_uid})"
        if st.st_mode & 0o022 and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX):
            return f"{part} can be written by others"
    return None


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _cached(folder: Path, key: str) -> Path | None:
    """The library built for `key` in `folder` when its bytes are what was built (its digest is in its name), its
    folder and file safe; a damaged one (truncated, another file under its name) is removed and None returned."""
    for found in folder.glob(f"senti-kernels-{key}-*.so"):
        if unsafe(found) is None and found.name == f"senti-kernels-{key}-{_digest(found)}.so":
            return found
        found.unlink(missing_ok=True)
    return None


def build(folder: Path | None = None) -> Path:
    """Compile kernels.c into `folder` (the cache folder) unless already built; return the library's path. A cache
    folder that is not safe (`unsafe`) is not used: the library is built in a private folder, with a warning.
    Raises RuntimeError with the compiler's first error line when the build fails."""
    command = compiler()
    key = hashlib.sha256("\n".join([source_digest(), " ".join(command), " ".join(FLAGS)]).encode()).hexdigest()[:16]
    folder = folder or cache_folder()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    why = unsafe(folder)
    if why is not None:
        log.warning("senti's kernel cache is not safe to load from (%s); building in a private folder", why)
        folder = Path(tempfile.mkdtemp(prefix="senti-kernels-"))  # 0700, this process's own
        atexit.register(shutil.rmtree, folder, True)
    if (found := _cached(folder, key)) is not None:
        return found
    with tempfile.TemporaryDirectory(dir=folder) as tmp:  # built aside, then renamed: never half-written
        built = Path(tmp) / "kernels.so"
        compile_library(built)
        built.chmod(0o755)
        target = folder / f"senti-kernels-{key}-{_digest(built)}.so"
        os.replace(built, target)
    return target


def _open(path: Path) -> ctypes.CDLL:
    """The library at `path`, its signatures declared and MKL's batched sgemm handed to it. Raises RuntimeError
    when it was built from another kernels.c or Paddle's wheel has no MKL; OSError or AttributeError when it is not
    a library with senti's symbols."""
    library = ctypes.CDLL(str(path))
    library.senti_source_digest.restype = ctypes.c_char_p
    if library.senti_source_digest().decode() != source_digest():
        raise RuntimeError(f"{path.name} was built from another kernels.c")
    for name, arguments in SIGNATURES.items():
        function = getattr(library, name)
        function.argtypes = arguments
        function.restype = None
    mkl = paddle_mkl()
    if mkl is None:
        raise RuntimeError("this Paddle wheel has no MKL (libs/libmklml_intel.so)")
    library.senti_use_gemm(ctypes.cast(mkl.cblas_sgemm_batch, ctypes.c_void_p))
    return library


def _installed_library() -> tuple[ctypes.CDLL, str] | None:
    """The library built at install, where it is there, safe and built from this kernels.c (an editable install's
    stays behind when kernels.c changes); else None, saying why when it is there."""
    if not INSTALLED.is_file():
        return None
    why = unsafe(INSTALLED)
    if why is None:
        try:
            return _open(INSTALLED), f"{INSTALLED.name}, built at install"
        except (RuntimeError, OSError, AttributeError) as error:
            why = str(error).splitlines()[0]
    log.warning("senti's kernels built at install are not used (%s); building them here", why)
    return None


@lru_cache(maxsize=1)
def load():
    """The C kernels' library, or None (with one warning saying why) where they cannot be had here."""
    if kernels_off():
        return None
    try:
        found = None if built_on_first_use_only() else _installed_library()
        if found is None:
            path = build()
            found = _open(path), f"{path.name}, built on first use"
    except (RuntimeError, OSError, AttributeError, subprocess.TimeoutExpired) as error:
        why = str(error).splitlines()[0] if str(error) else type(error).__name__
        if kernels_required():
            raise RuntimeError(f"SENTI_REQUIRE_KERNELS is set and senti's C kernels are off: {why}") from error
        _STATUS.update(path="python", why=why)
        log.warning("senti's C training kernels are off (%s); training uses the Python kernels", why)
        return None
    library, how = found
    _STATUS.update(path="c", why=how)
    return library


_STATUS = {"path": "python", "why": "not loaded yet"}
OFF_WORDS = ("0", "false", "no", "off")


def kernels_off() -> bool:
    """SENTI_NATIVE_KERNELS=0 (or false, no, off, in any case) chooses the Python kernels."""
    return os.environ.get("SENTI_NATIVE_KERNELS", "1").strip().lower() in OFF_WORDS


def built_on_first_use_only() -> bool:
    """SENTI_NATIVE_KERNELS=build: the library built at install is passed over and kernels.c compiled on first use
    (the fallback's own check, or a library built at install that is suspected)."""
    return os.environ.get("SENTI_NATIVE_KERNELS", "").strip().lower() == "build"


def kernels_required() -> bool:
    """SENTI_REQUIRE_KERNELS=1 (CI sets it): a machine where the C kernels do not build fails instead of falling
    back to the Python kernels, so their tests cannot skip unseen."""
    value = os.environ.get("SENTI_REQUIRE_KERNELS", "").strip().lower()
    return bool(value) and value not in OFF_WORDS


def status() -> str:
    """Which kernels training uses and why, as metrics.json and `senti info` say it: `c (LIBRARY)` or
    `python (WHY)`."""
    load()
    if kernels_off():
        return f"python (SENTI_NATIVE_KERNELS={os.environ['SENTI_NATIVE_KERNELS']})"
    return f"{_STATUS['path']} ({_STATUS['why']})"


def _ready(t):
    """`t` as a contiguous float32 tensor."""
    if t.dtype != paddle.float32:
        t = t.astype("float32")
    if not t.is_contiguous():
        t = t.contiguous()
    return t


def _ptr(t) -> int:
    return t.data_ptr()


class Seeds:
    """One 64-bit seed per dropout call, from a generator seeded by the run's seed: reproducible runs."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def next(self) -> int:
        return int(self.rng.integers(0, 2**63))


class Dropout(PyLayer):
    @staticmethod
    def forward(ctx, x, p: float, seeds: Seeds):
        lib = load()
        x = _ready(x)
        y = paddle.empty(x.shape, "float32")
        keep = paddle.empty(x.shape, "uint8")
        lib.senti_dropout_fwd(_ptr(x), _ptr(y), _ptr(keep), x.size, p, seeds.next())
        ctx.save_for_backward(keep)
        ctx.p = p
        return y

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensor()
        grad = _ready(grad)
        out = paddle.empty(grad.shape, "float32")
        load().senti_dropout_bwd(_ptr(grad), _ptr(keep), _ptr(out), grad.size, ctx.p)
        return out


class Linear(PyLayer):
    """y = x @ weight + bias for x of shape [..., in]: Paddle's matmuls, with the bias added and its gradient summed
    by senti's kernels (Paddle's column sum over the tokens was slower than the matmul beside it)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        rows = x.reshape([-1, x.shape[-1]])
        out = paddle.matmul(rows, weight)
        load().senti_bias_add(_ptr(out), _ptr(bias), out.shape[0], out.shape[1])
        ctx.save_for_backward(rows, weight)
        ctx.wanted = (not x.stop_gradient, not weight.stop_gradient, not bias.stop_gradient)
        return out.reshape(x.shape[:-1] + [weight.shape[1]])

    @staticmethod
    def backward(ctx, grad):
        return linear_grads(ctx, _ready(grad), _column_sum)


def _column_sum(rows):
    out = paddle.empty([rows.shape[1]], "float32")
    load().senti_column_sum(_ptr(rows), _ptr(out), rows.shape[0], rows.shape[1])
    return out


def _matmul(a, b, trans_a: bool, trans_b: bool):
    return paddle.matmul(a, b, transpose_x=trans_a, transpose_y=trans_b)


def linear_grads(ctx, grad, column_sum, matmul=_matmul, operand=None):
    """The gradients of y = x @ weight + bias for a PyLayer that saved (x's rows, weight) and `ctx.wanted`: products
    `matmul(a, b, trans_a, trans_b)` for x and the weight (of grad's rows as `operand` makes them: bf16.py rounds
    them to bfloat16), `column_sum(grad's rows)` for the bias; None for a frozen input."""
    rows, weight = ctx.saved_tensor()
    grad_rows = grad.reshape([-1, grad.shape[-1]])
    want_x, want_weight, want_bias = ctx.wanted
    factor = operand(grad_rows) if operand is not None and (want_x or want_weight) else grad_rows
    grad_x = matmul(factor, weight, False, True).reshape(grad.shape[:-1] + [weight.shape[0]]) if want_x else None
    grad_weight = matmul(rows, factor, True, False) if want_weight else None
    return grad_x, grad_weight, column_sum(grad_rows) if want_bias else None


class Gelu(PyLayer):
    """GELU in its exact (erf) form, as `paddle.nn.functional.gelu(x)`."""

    @staticmethod
    def forward(ctx, x):
        x = _ready(x)
        y = paddle.empty(x.shape, "float32")
        load().senti_gelu_fwd(_ptr(x), _ptr(y), x.size)
        ctx.save_for_backward(x)
        return y

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensor()
        grad = _ready(grad)
        out = paddle.empty(x.shape, "float32")
        load().senti_gelu_bwd(_ptr(x), _ptr(grad), _ptr(out), x.size)
        return out


class LayerNorm(PyLayer):
    """Layer norm over the last axis with a weight and a bias, as `paddle.nn.LayerNorm`."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps: float):
        x = _ready(x)
        cols = x.shape[-1]
        rows = x.size // cols
        y = paddle.empty(x.shape, "float32")
        mean = paddle.empty([rows], "float32")
        rstd = paddle.empty([rows], "float32")
        load().senti_layer_norm_fwd(_ptr(x), _ptr(weight), _ptr(bias), _ptr(y), _ptr(mean), _ptr(rstd), rows, cols,
                                    eps)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.wanted = (not x.stop_gradient, not weight.stop_gradient, not bias.stop_gradient)
        return y

    @staticmethod
    def backward(ctx, grad):
        x, weight, mean, rstd = ctx.saved_tensor()
        grad = _ready(grad)
        cols = x.shape[-1]
        dx = paddle.empty(x.shape, "float32")
        dweight = paddle.empty([cols], "float32")
        dbias = paddle.empty([cols], "float32")
        load().senti_layer_norm_bwd(_ptr(grad), _ptr(x), _ptr(weight), _ptr(mean), _ptr(rstd), _ptr(dx),
                                    _ptr(dweight), _ptr(dbias), x.size // cols, cols)
        return tuple(g if wanted else None for g, wanted in zip((dx, dweight, dbias), ctx.wanted))


class Attention(PyLayer):
    """dropout(softmax(scale q k^T + mask)) v over `heads` heads, q, k, v and the output as [batch, tokens,
    heads x width]; `mask` [batch, tokens] is added to every query's scores (None: no mask)."""

    @staticmethod
    def forward(ctx, q, k, v, mask, heads: int, scale: float, p: float, seeds: Seeds):
        q, k, v = _ready(q), _ready(k), _ready(v)
        mask = None if mask is None else _ready(mask)
        batch, tokens, row = q.shape
        out = paddle.empty(q.shape, "float32")
        probs = paddle.empty([batch, heads, tokens, tokens], "float32")
        keep = paddle.empty([batch, heads, tokens, tokens] if p > 0 else [1], "uint8")
        weights = paddle.empty([batch, heads, tokens, tokens] if p > 0 else [1], "float32")  # scratch
        slots = paddle.empty([6 * batch * heads], "int64")  # scratch: the heads' addresses
        mask_ptr = None if mask is None else _ptr(mask)
        load().senti_attention_fwd(_ptr(q), _ptr(k), _ptr(v), mask_ptr, _ptr(out), _ptr(probs), _ptr(keep),
                                   _ptr(weights), _ptr(slots), batch, tokens, heads, row // heads, scale, p,
                                   seeds.next() if p > 0 else 0)
        ctx.save_for_backward(q, k, v, probs, keep)
        ctx.shape = (batch, tokens, heads, row // heads, scale, p)
        ctx.masked = mask is not None
        return out

    @staticmethod
    def backward(ctx, grad):
        q, k, v, probs, keep = ctx.saved_tensor()
        batch, tokens, heads, width, scale, p = ctx.shape
        grad = _ready(grad)
        dq, dk, dv = (paddle.empty(q.shape, "float32") for _ in range(3))
        scratch = paddle.empty(probs.shape, "float32")
        weights = paddle.empty(probs.shape if p > 0 else [1], "float32")
        slots = paddle.empty([9 * batch * heads], "int64")
        load().senti_attention_bwd(_ptr(grad), _ptr(q), _ptr(k), _ptr(v), _ptr(probs), _ptr(keep), _ptr(dq),
                                   _ptr(dk), _ptr(dv), _ptr(scratch), _ptr(weights), _ptr(slots), batch, tokens,
                                   heads, width, scale, p)
        return (dq, dk, dv, None) if ctx.masked else (dq, dk, dv)
