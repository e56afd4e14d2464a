"""The operators of a transformer layer's training step, Paddle against PyTorch on the same CPU and shapes.

    python -m experiments.op_speed [--peer-python .venv-peer/bin/python] [--threads 2]

Times, forward and backward unless said, on a batch of 32 x 128 tokens of a 312-wide layer (1,248 inside the FFN,
12 heads): a Linear 312 -> 1,248, its forward alone, dropout, GELU (erf and tanh), layer norm, a same-shape add,
the attention core (QK^T, softmax, times V) and splitting heads (reshape and transpose). Medians of 20 runs after
3 warm-ups, in milliseconds; Paddle and senti's C kernels (where senti has one) in this interpreter, PyTorch in
`--peer-python` (`make peer-venv`), each with `--threads` threads, one after the other.
"""

from __future__ import annotations

import argparse
import json
import subprocess

B, L, H, INNER, HEADS = 32, 128, 312, 1248, 12


def _paddle_inputs():
    """The activations (needing gradients) and layers both Paddle columns time: x [B, L, H], h [B, L, INNER]."""
    import paddle

    x = paddle.randn([B, L, H])
    h = paddle.randn([B, L, INNER])
    for t in (x, h):
        t.stop_gradient = False
    return x, h, paddle.nn.Linear(H, INNER), paddle.nn.LayerNorm(H)


def _without_gradients(fn):
    import paddle

    def call():
        with paddle.no_grad():
            fn()

    return call


def paddle_ops() -> dict:
    import paddle
    import paddle.nn.functional as F

    x, h, linear, norm = _paddle_inputs()
    a = paddle.randn([B, HEADS, L, H // HEADS])
    a.stop_gradient = False

    def attention():
        probs = F.softmax(paddle.matmul(a, a, transpose_y=True) * 0.2, -1)
        paddle.matmul(probs, a).sum().backward()

    return {
        "Linear 312->1248": lambda: linear(x).sum().backward(),
        "Linear 312->1248, forward only": _without_gradients(lambda: linear(x)),
        "dropout 0.1 on [32,128,1248]": lambda: F.dropout(h, 0.1, training=True).sum().backward(),
        "GELU (erf)": lambda: F.gelu(h).sum().backward(),
        "GELU (tanh)": lambda: F.gelu(h, approximate=True).sum().backward(),
        "layer norm": lambda: norm(x).sum().backward(),
        "add, same shape": lambda: (x + x).sum().backward(),
        "attention core": attention,
        "split heads (reshape, transpose)": lambda: x.reshape([B, L, HEADS, H // HEADS]).transpose(
            [0, 2, 1, 3]).sum().backward(),
    }


def senti_ops() -> dict:
    """The same operators through senti's C kernels (senti.kernels.native), where senti has one; the
    attention core reads its heads in place from [32, 128, 312] (x as query, key and value), so it has no head
    split to time."""
    from senti.kernels import native

    if native.load() is None:
        return {}
    seeds = native.Seeds(0)
    x, h, linear, norm = _paddle_inputs()
    return {
        "Linear 312->1248": lambda: native.Linear.apply(x, linear.weight, linear.bias).sum().backward(),
        "Linear 312->1248, forward only": _without_gradients(
            lambda: native.Linear.apply(x, linear.weight, linear.bias)),
        "dropout 0.1 on [32,128,1248]": lambda: native.Dropout.apply(h, 0.1, seeds).sum().backward(),
        "GELU (erf)": lambda: native.Gelu.apply(h).sum().backward(),
        "layer norm": lambda: native.LayerNorm.apply(x, norm.weight, norm.bias, 1e-5).sum().backward(),
        "attention core": lambda: native.Attention.apply(x, x, x, None, HEADS, 0.2, 0.0, seeds).sum().backward(),
    }


def torch_ops() -> dict:
    import torch
    import torch.nn.functional as F

    x = torch.randn(B, L, H, requires_grad=True)
    h = torch.randn(B, L, INNER, requires_grad=True)
    a = torch.randn(B, HEADS, L, H // HEADS, requires_grad=True)
    linear, norm = torch.nn.Linear(H, INNER), torch.nn.LayerNorm(H)

    def attention():
        probs = F.softmax(torch.matmul(a, a.transpose(-1, -2)) * 0.2, -1)
        torch.matmul(probs, a).sum().backward()

    def linear_forward():
        with torch.no_grad():
            linear(x)

    return {
        "Linear 312->1248": lambda: linear(x).sum().backward(),
        "Linear 312->1248, forward only": linear_forward,
        "dropout 0.1 on [32,128,1248]": lambda: F.dropout(h, 0.1, training=True).sum().backward(),
        "GELU (erf)": lambda: F.gelu(h).sum().backward(),
        "GELU (tanh)": lambda: F.gelu(h, approximate="tanh").sum().backward(),
        "layer norm": lambda: norm(x).sum().backward(),
        "add, same shape": lambda: (x + x).sum().backward(),
        "attention core": attention,
        "split heads (reshape, transpose)": lambda: x.reshape(B, L, HEADS, H // HEADS).permute(
            0, 2, 1, 3).sum().backward(),
    }


def measure(framework: str, threads: int) -> dict:
    if framework == "torch":
        import torch

        torch.set_num_threads(threads)
        ops = torch_ops()
    else:
        from senti.core.runtime import configure_runtime, import_paddle

        configure_runtime(threads)
        import_paddle()
        ops = paddle_ops()
    from experiments.dense_linear import median_ms  # standard library only at import: fine in the peer venv

    timed = {name: median_ms(fn) for name, fn in ops.items()}
    if framework == "paddle":
        timed.update({f"senti {name}": median_ms(fn) for name, fn in senti_ops().items()})
    return timed


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--framework", choices=["paddle", "torch"], default=None, help=argparse.SUPPRESS)
    parser.add_argument("--peer-python", default=".venv-peer/bin/python")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.framework:  # one side, as a child process
        print(json.dumps(measure(args.framework, args.threads)))
        return {}
    from senti.core.runtime import cpu_info

    paddle_ms = measure("paddle", args.threads)
    done = subprocess.run([args.peer_python, "-m", "experiments.op_speed", "--framework", "torch", "--threads",
                           str(args.threads)], capture_output=True, text=True, check=True)
    torch_ms = json.loads(done.stdout.strip().splitlines()[-1])
    info = cpu_info()
    print(f"{info['model']}; flags {', '.join(info['flags'])}; {args.threads} threads")
    print("| operator (forward and backward) | Paddle ms | senti's C kernel ms | PyTorch ms | Paddle / PyTorch | senti / "
          "PyTorch |\n|---|---|---|---|---|---|")
    for name, ms in paddle_ms.items():
        if name.startswith("senti "):
            continue
        ours = paddle_ms.get(f"senti {name}")
        print(f"| {name} | {ms:.2f} | {'—' if ours is None else f'{ours:.2f}'} | {torch_ms[name]:.2f} | "
              f"{ms / max(torch_ms[name], 1e-9):.1f}x | {'—' if ours is None else f'{ours / torch_ms[name]:.2f}x'} |")
    return {"paddle": paddle_ms, "torch": torch_ms}


if __name__ == "__main__":
    main()
