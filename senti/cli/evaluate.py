"""`senti eval`: accuracy, macro-F1, per-class precision and recall, and the confusion matrix of a checkpoint
or of an export folder (scored by the runtime that serves it)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from senti.cli.common import TRUST_PICKLE_HELP, choices, console, quiet, shown, user_errors
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
    from senti.toolkit.evaluation.evaluate import evaluate_model

    datasets = dataset or []
    with user_errors():
        if output is not None:  # before the model loads: a run must not end in a write that cannot happen
            from senti.serving.streaming import check_output

            check_output(None, output, suffixes=(".json",))
        if len(datasets) < 2 and group_by is None and _heads_scored(model, datasets, split.value, output,
                                                                     (batch_size, trust_pickle, backend.value)):
            return
        if len(datasets) > 1 or group_by is not None:
            from senti.toolkit.evaluation.evaluate import Scorer, evaluate_domains

            where = output or model / layout.eval_domains("all" if group_by else split.value)
            report = evaluate_domains(Scorer(model, batch_size, trust_pickle, backend.value), datasets, split.value,
                                      baseline, seed, group_by, plots=where)
            _print_domains(report, where)
            return
        output = output or model / layout.eval_results(split.value)
        result = evaluate_model(model, datasets[0] if datasets else None, split.value, batch_size, trust_pickle,
                                backend.value, baseline, seed, plots=output)
    result.write_to(output)
    seed = result.data.seed if result.data else None
    cut = f", seed {seed}" if seed is not None else ""
    console.print(f"{split.value} of {result.dataset}{cut}, scored by {result.backend}: accuracy "
                  f"[bold]{result.accuracy:.4f}[/], macro-F1 [bold]{result.macro_f1:.4f}[/] on {result.n} texts")
    b = result.baseline
    if b is not None and b.skipped:
        console.print(f"baseline skipped: {b.skipped}")
    elif b is not None and b.scored is not None:
        console.print(f"baseline ({b.model}, fitted in {b.fit_seconds or 0:.0f} s on {b.train_rows} training "
                      f"rows): accuracy [bold]{b.scored.accuracy:.4f}[/], macro-F1 {b.scored.macro_f1:.4f}"
                      f" on the same texts; model - baseline: {result.accuracy - b.scored.accuracy:+.4f}")
    if result.seen_in_training:
        from senti.toolkit.data.seen import describe

        console.print(describe(result.seen_in_training, result.n))
    per_class = Table(title="per class")
    for col in ("label", "precision", "recall", "F1", "texts"):
        per_class.add_column(col, justify="right")
    for lab in result.labels:
        per_class.add_row(lab, f"{result.per_class_precision[lab]:.4f}", f"{result.per_class_recall[lab]:.4f}",
                          f"{result.per_class_f1[lab]:.4f}", str(result.support[lab]))
    console.print(per_class)
    table = Table(title="confusion matrix (rows: true, columns: predicted)")
    table.add_column("")
    for lab in result.labels:
        table.add_column(lab, justify="right")
    for lab, row in zip(result.labels, result.confusion_matrix):
        table.add_row(lab, *map(str, row))
    console.print(table)
    _print_calibration(result, output)
    console.print(f"written: {output}")


def _print_calibration(result, output: Path) -> None:
    """Do the probabilities mean what they say: the model's plain softmax, its calibrated answers and the baseline's
    on the same texts (`result`: an EvalRecord), then the abstention threshold's figures and the plots' files."""
    from senti.core import layout

    c = result.calibration
    if c is None:
        return
    table = Table(title=f"calibration on these {result.n} texts (ECE: 15 bins of equal mass, and of equal width)")
    for col in ("scores", "accuracy", "confidence", "ECE", "ECE width", "Brier", "log-loss", "AURC"):
        table.add_column(col, justify="right")
    rows = [("model, softmax", c.raw)]
    if c.calibrated is not None:
        rows.append((f"model, calibrated (T={c.temperature:.3f})", c.calibrated))
    b = result.baseline.scored if result.baseline else None
    if b is not None and b.calibration is not None:
        rows.append(("n-gram baseline", b.calibration))
    for name, f in rows:
        table.add_row(name, *(f"{v:.4f}" for v in (f.accuracy, f.mean_confidence, f.ece, f.ece_width, f.brier,
                                                   f.log_loss, f.aurc)))
    console.print(table)
    given = c.calibrated or c.raw
    console.print("accuracy on the most confident 80% / 90% / 95% of the texts: " +
                  " / ".join(f"{given.accuracy_at[k]:.4f}" for k in ("0.8", "0.9", "0.95")), markup=False)
    if c.abstain is not None:
        a = c.abstain
        console.print(f"unsure below {a.threshold:.4f} (chosen on dev for {a.target}): {a.unsure} of {result.n} "
                      f"unsure, the other {a.coverage:.1%} answered at precision {a.precision:.4f}", markup=False)
    plots = [output.with_name(layout.eval_plot(output.name, kind)) for kind in ("calibration", "risk_coverage")]
    console.print(f"plots: {plots[0]} (reliability), {plots[1]} (risk-coverage)", markup=False)


def _print_domains(report, output: Path) -> None:
    """The per-domain table, and its record (a DomainReport) written to `output`."""
    report.write_to(output)
    table = Table(title=f"{report.split} split per domain, scored by {report.backend}")
    for col in ("domain", "texts", "accuracy", "macro-F1", "baseline", "baseline F1", "model - baseline",
                "seen in training"):
        table.add_column(col, justify="right")
    calibration = Table(title="calibration per domain")
    for col in ("domain", "ECE softmax", "ECE", "log-loss", "baseline ECE", "acc @90%", "answered", "precision"):
        calibration.add_column(col, justify="right")
    for name, r in report.domains.items():
        b = r.baseline.scored if r.baseline else None
        seen = r.seen_in_training
        table.add_row(shown(name), str(r.n), f"{r.accuracy:.4f}", f"{r.macro_f1:.4f}",
                      f"{b.accuracy:.4f}" if b else "-", f"{b.macro_f1:.4f}" if b else "-",
                      f"{r.accuracy - b.accuracy:+.4f}" if b else "-", str(seen.texts) if seen else "-")
        calibration.add_row(shown(name), *_calibration_cells(r.calibration, b))
    console.print(table)
    console.print(calibration)
    console.print("ECE: 15 bins of equal mass; acc @90%: accuracy on the 90% most confident texts; answered and "
                  "precision: at the export's abstention threshold (- without one)", markup=False)
    first = next(iter(report.domains.values()), None)
    if first is not None and first.baseline is not None and first.baseline.model:
        b = first.baseline
        console.print(f"baseline: {b.model}, fitted once in {b.fit_seconds or 0:.0f} s on the model's "
                      f"{b.train_rows} training rows")
    console.print(f"written: {output}")


def _calibration_cells(c, baseline) -> list[str]:
    """A domain's calibration cells: ECE of the softmax and of the answers given, the baseline's, accuracy at 90%
    coverage, and the share answered and its precision at the abstention threshold."""
    if c is None:
        return ["-"] * 7
    given = c.calibrated or c.raw
    cells = [f"{c.raw.ece:.4f}", f"{given.ece:.4f}", f"{given.log_loss:.4f}",
             f"{baseline.calibration.ece:.4f}" if baseline is not None and baseline.calibration else "-",
             f"{given.accuracy_at['0.9']:.4f}"]
    return cells + ([f"{c.abstain.coverage:.1%}", f"{c.abstain.precision:.4f}"] if c.abstain else ["-", "-"])


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
