"""`senti aspects`: which of a team's aspects each text mentions, and with what polarity."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.table import Table

from senti.cli.common import choices, console, quiet, user_errors
from senti.serving.aspects import DEFAULT_NEUTRAL_MARGIN, UNITS

app = typer.Typer()
if TYPE_CHECKING:
    Unit = Any
else:
    Unit = choices("Unit", UNITS)


@app.command()
def aspects(
    model: Annotated[Path, typer.Option(help="An export folder (senti export) of a two-class positive/negative "
                                             "model.", exists=True, file_okay=False)],
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
