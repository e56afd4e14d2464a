"""`senti info`: what senti runs on."""

from __future__ import annotations

import typer
from rich.table import Table

from senti.cli.common import console

app = typer.Typer()


@app.command()
def info():
    """Library versions, the CPU and the devices Paddle sees."""
    from senti.core.runtime import configure_runtime

    runtime = configure_runtime()
    import platform

    from senti.core.runtime import import_paddle

    paddle = import_paddle()

    from senti.core.runtime import RECORDED_FLAGS, int8_is_fast, package_versions

    table = Table(title="senti environment", show_header=False)
    table.add_row("python", platform.python_version())
    for pkg, version in package_versions().items():
        table.add_row(pkg, version)
    table.add_row("cpu", f"{runtime.cpu_model} ({runtime.cores} cores available)")
    flags = runtime.cpu_flags
    int8 = ("faster than fp32 (VNNI/AMX): auto serves it" if int8_is_fast(flags)
            else "no faster than fp32 (no VNNI): auto serves fp32")
    table.add_row("cpu flags", f"{', '.join(flags) or 'none of ' + ', '.join(RECORDED_FLAGS)}; INT8 {int8}")
    table.add_row("threads", f"OMP {runtime.omp_num_threads}, MKL_DEBUG_CPU_TYPE={runtime.mkl_debug_cpu_type}")
    from senti.kernels import native

    table.add_row("CPU training kernels", native.status())
    from senti.kernels import bf16

    why = bf16.why_not(flags)
    table.add_row("CPU --amp", "bfloat16 Linears (oneDNN)" if why is None else f"fp32 ({why})")
    gpus = paddle.device.cuda.device_count() if paddle.device.is_compiled_with_cuda() else 0
    table.add_row("gpu", ", ".join(paddle.device.cuda.get_device_name(i) for i in range(gpus)) or
                  ("none visible" if paddle.device.is_compiled_with_cuda() else "none (CPU build of paddle)"))
    table.add_row("xpu", "compiled in" if paddle.device.is_compiled_with_xpu() else "no")
    table.add_row("custom devices (npu, ...)", ", ".join(paddle.device.get_all_custom_device_type()) or "none")
    console.print(table)
