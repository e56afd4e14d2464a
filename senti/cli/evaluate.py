"""`senti eval`: accuracy, macro-F1, per-class precision and recall, and the confusion matrix of a checkpoint
or of an export folder (scored by the runtime that serves it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from senti.cli.common import TRUST_PICKLE_HELP, choices, console, quiet, user_errors
from senti.cli.eval_tables import print_domains, print_split
from senti.cli.predict import Backend
from senti.toolkit.data.splits import EVAL_SPLITS

app = typer.Typer()
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Split = Any
else:
    Split = choices("Split", EVAL_SPLITS)


@app.command("eval")
def evaluate(
    model: Annotated[Path, typer.Option(help="Checkpoint folder (senti train) or export folder (senti export).",
                                        exists=True, file_okay=False)],
    dataset: Annotated[Optional[list[str]], typer.Option(
        help="Dataset, as for senti train (default: the one the model was trained on, cut the same way). Give it "
             "more than once for a table per domain.")] = None,
    group_by: Annotated[Optional[str], typer.Option(
        help="A column of the one --dataset file that names each row's domain: a table per domain over every "
             "row of the file.")] = None,
    seed: Annotated[Optional[int], typer.Option(
        help="How --dataset (another dataset) is cut when it has no split files (default 42 for every model, as "
             "senti train and senti pretrain cut it).")] = None,
    split: Annotated[Split, typer.Option(help="Which split to score; all: every row of the file or folder "
                                              "(a labelled test file of your own, say).")] = Split.test,
    output: Annotated[Optional[Path], typer.Option(help="JSON file for the results (default: MODEL/eval_SPLIT.json;"
                                                        " per domain: MODEL/eval_domains_SPLIT.json).")] = None,
    batch_size: Annotated[int, typer.Option(help="Texts per batch.", min=1)] = 64,
    backend: Annotated[Backend, typer.Option(help="Export folders: the runtime and format to score with.")] =
        Backend.auto,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
    baseline: Annotated[bool, typer.Option(help="Fit the char n-gram logistic regression on the training split "
                                                "and score it beside the model (seconds).")] = True,
):
    """Accuracy, macro-F1, per-class precision and recall, and the confusion matrix on one split, or all rows; with
    several --dataset (or --group-by), one table row per domain with the baseline beside each."""
    quiet()
    from senti.core import layout
    from senti.toolkit.evaluation.evaluate import Scorer, evaluate_domains, evaluate_split, write_plots

    datasets = dataset or []
    with user_errors():
        if output is not None:  # before the model loads: a run must not end in a write that cannot happen
            from senti.serving.streaming import check_output

            check_output(None, output, suffixes=(".json",))
        if len(datasets) < 2 and group_by is None and _heads_scored(model, datasets, split.value, output,
                                                                     (batch_size, trust_pickle, backend.value)):
            return
        scorer = Scorer(model, batch_size, trust_pickle, backend.value)
        if len(datasets) > 1 or group_by is not None:
            where = output or model / layout.eval_domains("all" if group_by else split.value)
            report = evaluate_domains(scorer, datasets, split.value, baseline, seed, group_by)
            print_domains(report, where, write_plots(scorer, where))
            return
        output = output or model / layout.eval_results(split.value)
        result = evaluate_split(scorer, datasets[0] if datasets else None, split.value, baseline, seed)
    print_split(result, output, write_plots(scorer, output))


def _heads_scored(model: Path, datasets: list[str], split: str, output: Optional[Path], scoring: tuple) -> bool:
    """A model with aspect heads scored per aspect and printed (True); False for any other model."""
    from senti.core import layout
    from senti.core.aspects import head_aspects
    from senti.toolkit.evaluation.evaluate import Scorer, evaluate_heads, model_labels

    if head_aspects(model_labels(model)) is None:
        return False
    record = evaluate_heads(Scorer(model, *scoring), datasets[0] if datasets else None, split)
    _print_heads(record, output or model / layout.eval_results(split))
    return True


def _print_heads(record, output: Path) -> None:
    """A model with aspect heads: the figures over every labelled pair and per aspect (`record`: an
    AspectEvalRecord), written to `output`."""
    record.write_to(output)
    f = record.figures
    console.print(f"{record.split} of {record.dataset} ({record.texts} texts, {f.pairs} labelled pairs), scored by "
                  f"{record.backend}: 4-way accuracy [bold]{f.accuracy:.4f}[/], macro-F1 [bold]{f.macro_f1:.4f}[/], "
                  f"mention F1 {f.mention_f1:.4f}")
    table = Table(title="per aspect")
    for col in ("aspect", "pairs", "accuracy", "macro-F1", "mention F1"):
        table.add_column(col, justify="right")
    for name, a in record.per_aspect.items():
        table.add_row(name, str(a.pairs), f"{a.accuracy:.4f}", f"{a.macro_f1:.4f}", f"{a.mention_f1:.4f}")
    console.print(table)
    console.print(f"written: {output}")
