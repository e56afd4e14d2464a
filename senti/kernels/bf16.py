"""`--amp` on a CPU: a Linear's matrix products in bfloat16 through oneDNN's GEMM, everything else in float32.

Paddle's CPU build has no bfloat16 matmul kernel and `paddle.amp.auto_cast` does nothing on a CPU, but the oneDNN
library inside Paddle's own wheel (`paddle/libs/libdnnl.so.3`) exports `dnnl_gemm_bf16bf16f32`: bfloat16 inputs,
float32 accumulation and output, on AVX-512 BF16 and AMX. On a 2-core AMD EPYC with AVX-512 BF16 it ran a
4096 x 384 x 1536 product 2.1-2.6x faster than Paddle's float32 matmul (docs/results/training-speed.md).

The recipe is the usual mixed-precision one: the weights stay float32 (the optimizer updates them), each Linear
rounds its input and weight to bfloat16 for the product (senti's C kernel `senti_to_bf16`), and its gradients for
the input and the weight are bfloat16 products of the rounded output gradient; the bias, layer norm, softmax,
attention, the loss and the optimizer stay float32. So there is no loss scaling: bfloat16 has float32's range.

This gap is Paddle's (no bfloat16 matmul on CPU): when Paddle's CPU AMP runs matmuls in bfloat16, this module can go.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

import paddle
from paddle.autograd import PyLayer

from senti.core.runtime import cpu_info, paddle_dnnl_path
from senti.kernels import native

BF16_FLAGS = ("avx512_bf16", "amx_bf16")
_L = ctypes.c_int64
GEMM_ARGUMENTS: list = [ctypes.c_char, ctypes.c_char, _L, _L, _L, ctypes.c_float, ctypes.c_void_p, _L, ctypes.c_void_p, _L,
                  ctypes.c_float, ctypes.c_void_p, _L]


@lru_cache(maxsize=1)
def _gemm():
    """oneDNN's `dnnl_gemm_bf16bf16f32` (row-major; returns dnnl_status_t, 0 for success), or the reason it is
    missing as a string."""
    path = paddle_dnnl_path()
    if path is None:
        return "this Paddle wheel has no oneDNN (libs/libdnnl.so.3)"
    try:
        function = ctypes.CDLL(str(path)).dnnl_gemm_bf16bf16f32
    except (OSError, AttributeError) as error:
        return f"oneDNN in this Paddle wheel has no bfloat16 GEMM ({str(error).splitlines()[0]})"
    function.argtypes = GEMM_ARGUMENTS
    function.restype = ctypes.c_int
    return function


def why_not(flags: list[str] | None = None) -> str | None:
    """Why a CPU cannot train in bfloat16 here, in words for a one-line message, or None when it can. `flags` as
    `cpu_info` gives them (default: this machine's)."""
    flags = cpu_info()["flags"] if flags is None else flags
    if not any(f in flags for f in BF16_FLAGS):
        return "this CPU has neither AVX-512 BF16 nor AMX (no avx512_bf16 or amx_bf16 flag)"
    if native.load() is None:
        return f"senti's C kernels are off ({native.status()})"
    found = _gemm()
    return found if isinstance(found, str) else None


def to_bf16(t):
    """A float32 tensor's values rounded to bfloat16, as a uint16 tensor of the same shape (contiguous)."""
    t = native._ready(t)
    out = paddle.empty(t.shape, paddle.uint16)
    native.load().senti_to_bf16(t.data_ptr(), out.data_ptr(), t.size)
    return out


def gemm(a, b, trans_a: bool, trans_b: bool):
    """op(a) @ op(b) in float32 from two 2-D bfloat16 (uint16) tensors, op transposing when asked."""
    m, k = (a.shape[1], a.shape[0]) if trans_a else a.shape
    n = b.shape[0] if trans_b else b.shape[1]
    out = paddle.empty([m, n], "float32")
    status = _gemm()(b"T" if trans_a else b"N", b"T" if trans_b else b"N", m, n, k, 1.0, a.data_ptr(), a.shape[1],
                     b.data_ptr(), b.shape[1], 0.0, out.data_ptr(), n)
    if status != 0:
        raise RuntimeError(f"oneDNN's bfloat16 GEMM failed (status {status}) on {m}x{k} by {k}x{n}")
    return out


class Linear(PyLayer):
    """y = x @ weight + bias for x of shape [..., in], the product in bfloat16 with float32 accumulation."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        rows = to_bf16(x.reshape([-1, x.shape[-1]]))
        weight16 = to_bf16(weight)
        out = gemm(rows, weight16, False, False)
        native.load().senti_bias_add(out.data_ptr(), native._ready(bias).data_ptr(), out.shape[0], out.shape[1])
        ctx.save_for_backward(rows, weight16)
        ctx.wanted = (not x.stop_gradient, not weight.stop_gradient, not bias.stop_gradient)
        return out.reshape(x.shape[:-1] + [weight.shape[1]])

    @staticmethod
    def backward(ctx, grad):  # the saved rows and weight are bfloat16; so is the gradient in the products
        return native.linear_grads(ctx, native._ready(grad), native._column_sum, gemm, to_bf16)
