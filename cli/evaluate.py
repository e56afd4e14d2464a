"""`senti eval`: accuracy, macro-F1 and the confusion matrix of a checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from senti.cli.common import TRUST_PICKLE_HELP, choices, console, quiet, user_errors
from senti.toolkit.data import SPLITS

app = typer.Typer()
Split = choices("Split", SPLITS)


@app.command("eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="Checkpoint folder written by senti train.", exists=True,
                                        file_okay=False)],
    dataset: Annotated[Optional[str], typer.Option(
        help="Dataset, as for senti train (default: the one the checkpoint was trained on, cut the same way).")]
        = None,
    split: Annotated[Split, typer.Option(help="Which split to score.")] = Split.test,
    output: Annotated[Optional[Path], typer.Option(help="JSON file for the results "
                                                        "(default: MODEL/eval_SPLIT.json).")] = None,
    batch_size: Annotated[int, typer.Option(help="Texts per batch.", min=1)] = 64,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
):
    """Accuracy, macro-F1 and the confusion matrix of a checkpoint on one split."""
    from senti.serving.runtime import configure_runtime

    configure_runtime()
    from senti.serving import layout
    from senti.serving.artifacts import write_json_atomic
    from senti.toolkit.evaluate import evaluate_checkpoint

    quiet()
    with user_errors():
        result = evaluate_checkpoint(model, dataset, split.value, batch_size, trust_pickle)
    output = output or model / layout.eval_results(split.value)
    write_json_atomic(output, result)
    console.print(f"{split.value} of {result['dataset']} (seed {result['data']['seed']}): accuracy "
                  f"[bold]{result['accuracy']:.4f}[/], macro-F1 [bold]{result['macro_f1']:.4f}[/] "
                  f"on {result['n']} texts")
    table = Table(title="confusion matrix (rows: true, columns: predicted)")
    table.add_column("")
    for lab in result["labels"]:
        table.add_column(lab, justify="right")
    for lab, row in zip(result["labels"], result["confusion_matrix"]):
        table.add_row(lab, *map(str, row))
    console.print(table)
    console.print(f"written: {output}")
