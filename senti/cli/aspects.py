"""`senti aspects`: which of a team's aspects each text mentions, and with what polarity."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from senti.cli.common import Unit, choices, console, quiet, shown, user_errors
from senti.serving.aspects import DEFAULT_NEUTRAL_MARGIN
from senti.toolkit.surge.aspect_report import DEFAULT_MIN_MENTIONS, PERIODS

app = typer.Typer()
if TYPE_CHECKING:
    Period = Any
else:
    Period = choices("Period", PERIODS)


@app.command()
def aspects(
    model: Annotated[Path, typer.Option(help="An export folder (senti export) of a two-class positive/negative "
                                             "model, or of one with aspect heads (senti train --aspects).",
                                        exists=True, file_okay=False)],
    aspects_file: Annotated[Path, typer.Option("--aspects", help="The aspect list: JSON {\"aspects\": [{\"name\", "
                                                                  "\"label\", \"keywords\"}]}.", exists=True,
                                               dir_okay=False)],
    input: Annotated[Path, typer.Option(help="Texts: .txt (one per line), .jsonl, .tsv or .csv.", exists=True,
                                        dir_okay=False)],
    output: Annotated[Path, typer.Option(help="JSONL: each input row with an `aspects` object beside it.")],
    text_column: Annotated[Optional[str], typer.Option(help="The text column of a .jsonl/.tsv/.csv input.")] = None,
    unit: Annotated[Unit, typer.Option(help="What a mention is found in and scored: a sentence or a clause.")] = (
        Unit.sentence),
    neutral_margin: Annotated[float, typer.Option(help="Answers within this of 0.5 are neutral.", min=0.0,
                                                  max=0.49)] = DEFAULT_NEUTRAL_MARGIN,
    threads: Annotated[Optional[int], typer.Option(help="CPU threads (default: all cores).", min=1)] = None,
):
    """Answer every aspect of --aspects for every text of --input: positive, neutral, negative or not mentioned,
    with the sentences that say so (character offsets) as evidence."""
    with user_errors():
        from senti.core.aspects import read_aspects
        from senti.serving.streaming import check_output

        listed = read_aspects(aspects_file)
        if output.suffix.lower() != ".jsonl":
            raise typer.BadParameter(f"{output}: aspect answers are nested; write them as .jsonl")
        check_output(input, output)
        quiet(threads)
        from senti.serving import Predictor
        from senti.serving.aspects import answer_file

        predictor = Predictor.load(model, threads=threads)
        counts = answer_file(predictor, input, output, listed, text_column, unit.value, neutral_margin)
    table = Table(title=f"{counts['rows']} texts -> {output}")
    for col in ("aspect", "positive", "neutral", "negative", "not mentioned"):
        table.add_column(col, justify="left" if col == "aspect" else "right")
    for a in listed:
        c = counts["aspects"][a.name]
        table.add_row(a.label or a.name, *(str(c[p]) for p in ("positive", "neutral", "negative", "not_mentioned")))
    console.print(table)
    if counts["errors"]:
        console.print(f"{counts['errors']} rows not answered (their `error` says why)")


@app.command("aspect-report")
def aspect_report(
    input: Annotated[Path, typer.Option(help="A file senti aspects answered (.jsonl), with a date column; or, with "
                                             "--rows, the output senti predict --engine ray --aspects wrote.",
                                        exists=True)],
    output_dir: Annotated[Path, typer.Option(help="Folder for report.json and negative_share.png.",
                                             file_okay=False)],
    date_column: Annotated[str, typer.Option(help="The column with each row's ISO date or date-time.")] = "date",
    period: Annotated[Period, typer.Option(help="Count by day, ISO week or month.")] = Period.week,
    text_column: Annotated[Optional[str], typer.Option(help="The text column (default: text, review, ...).")] = None,
    min_mentions: Annotated[int, typer.Option(help="Mentions an aspect needs in the last period and in those "
                                                   "before it for a jump to be named.", min=1)] = DEFAULT_MIN_MENTIONS,
    rows: Annotated[Optional[Path], typer.Option(help="The file Ray scored (its dates and texts), joined with "
                                                      "--input's answers by --id-column.", exists=True,
                                                 dir_okay=False)] = None,
    id_column: Annotated[str, typer.Option(help="With --rows: the column given to senti predict as "
                                                "--id-column.")] = "id",
):
    """Count each aspect's answers per period, plot each aspect's negative share over time, and name the aspect
    whose negative share jumped in the last period, with example reviews."""
    with user_errors():
        from senti.core.errors import DataError
        from senti.toolkit.surge.aspect_report import aspect_report as report_of
        from senti.toolkit.surge.aspect_report import mentions, ray_joined_rows, share_of, write_report

        if rows is None and input.is_dir():
            raise DataError(f"--input {input} is a folder: give --rows, the file Ray scored, to join its answers")
        joined = ray_joined_rows(input, rows, id_column, text_column) if rows is not None else None
        report = report_of(input, date_column, period.value, text_column, min_mentions, joined)
        paths = write_report(report, output_dir)
    last = report.periods[-1]
    table = Table(title=f"{report.rows} rows, {len(report.periods)} {period.value}s; last: {last}")
    for col in ("aspect", "mentions, last", "negative share, last", "before"):
        table.add_column(col, justify="left" if col == "aspect" else "right")
    for a in report.aspects:
        before = share_of(report.pooled(a, report.periods[:-1]))
        table.add_row(shown(a), str(mentions(report.counts[last][a])), _percent(report.negative_share(last, a)),
                      _percent(before))
    console.print(table)
    if report.first_skipped:
        console.print(f"{sum(report.skipped.values())} rows left out (first: {shown(report.first_skipped)})")
    _say_jump(report)
    console.print(f"report: {paths['report']}; plot: {paths['plot']}")


@app.command("aspect-units")
def aspect_units(
    input: Annotated[Path, typer.Option(help="Aspect labels: a folder with train and dev files, or one file (ASAP's "
                                             "CSV, JSONL {\"text\", \"aspects\": {name: polarity}}, or what senti "
                                             "label --aspects wrote).", exists=True)],
    aspects_file: Annotated[Path, typer.Option("--aspects", help="The aspect list whose keywords find the units.",
                                               exists=True, dir_okay=False)],
    output_dir: Annotated[Path, typer.Option(help="Folder for train.tsv, dev.tsv and test.tsv of unit rows.",
                                             file_okay=False)],
    unit: Annotated[Unit, typer.Option(help="The unit a row is: a sentence or a clause.")] = Unit.sentence,
    text_column: Annotated[Optional[str], typer.Option(help="The text column (default: text, review, ..., "
                                                            "reviewbody).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the split of a single file.")] = 0,
):
    """Turn a team's aspect labels into sentence rows (each unit that mentions a labelled aspect, with that aspect's
    polarity) for senti train --model PARENT --dataset OUTPUT_DIR to continue a model on."""
    with user_errors():
        from senti.core.aspects import read_aspects
        from senti.toolkit.data.aspect_units import write_aspect_units

        counts = write_aspect_units(input, read_aspects(aspects_file), output_dir, unit.value, text_column, seed)
    table = Table(title=f"unit rows -> {output_dir}")
    for col in ("split", "texts", "positive", "negative", "left out: both ways", "left out: in an earlier split"):
        table.add_column(col, justify="left" if col == "split" else "right")
    for split, c in counts.items():
        table.add_row(split, str(c.texts), str(c.rows.get("positive", 0)), str(c.rows.get("negative", 0)),
                      str(c.both_ways), str(c.repeats))
    console.print(table)
    unknown = sorted(set().union(*(c.unknown_aspects for c in counts.values())))
    if unknown:
        console.print(f"aspects in the data that the list does not have (not used): {', '.join(unknown[:10])}")
    console.print(f"next: senti train --model PARENT --dataset {output_dir} --replay OLD_DATA --output-dir MODEL")


def _percent(share: float | None) -> str:
    return "-" if share is None else f"{100 * share:.1f}%"


def _say_jump(report) -> None:
    jump = report.jump
    if jump is None:
        console.print("no aspect's negative share rose in the last period with enough mentions on both sides")
        return
    low, high = (round(100 * x, 1) for x in jump.interval)
    console.print(f"jump: {shown(jump.aspect)} negative in {_percent(jump.share)} of {jump.mentions} mentions in "
                  f"{jump.period}, against {_percent(jump.share_before)} of {jump.mentions_before} before "
                  f"(+{100 * (jump.share - jump.share_before):.1f} points, 95% interval {low} to {high})")
    for e in jump.examples:
        console.print(f"  line {e.line}: {shown(e.text[:120])}")
