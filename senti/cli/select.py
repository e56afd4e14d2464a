"""`senti select`: the unlabelled texts most worth labelling, written with their score and the reason."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from senti.cli.common import TRUST_PICKLE_HELP, Unit, choices, console, quiet, user_errors
from senti.toolkit.surge.selection import STRATEGIES

app = typer.Typer()
if TYPE_CHECKING:  # Enums made at run time from the library's names; Any to a type checker
    Strategy = Any
else:
    Strategy = choices("Strategy", STRATEGIES)


@app.command("select")
def select(
    model: Annotated[Path, typer.Option(help="Export folder or checkpoint that scores the texts.", exists=True,
                                        file_okay=False)],
    input: Annotated[Path, typer.Option(help="Unlabelled texts: .txt, .tsv, .csv or .jsonl (ids kept).",
                                        exists=True, dir_okay=False)],
    output: Annotated[Path, typer.Option(help="Where to write the picks: .jsonl, .tsv or .csv.")],
    budget: Annotated[int, typer.Option(help="How many texts to pick for labelling.", min=1)],
    strategy: Annotated[Strategy, typer.Option(help="uncertainty: smallest margin first; diverse: the same without "
                                                    "near-duplicates; random: the baseline.")] = Strategy.uncertainty,
    seed: Annotated[int, typer.Option(help="Seed of the random strategy.")] = 0,
    text_column: Annotated[Optional[str], typer.Option(help="Text column of a .tsv/.csv/.jsonl input.")] = None,
    trust_pickle: Annotated[bool, typer.Option(help=TRUST_PICKLE_HELP)] = False,
    exclude_labelled: Annotated[Optional[Path], typer.Option(help="A labels file of senti label: its labelled texts "
                                                                  "are not picked again.", exists=True,
                                                             dir_okay=False)] = None,
    aspects: Annotated[Optional[Path], typer.Option(help="A team's aspect list (as senti aspects reads it): rank by "
                                                         "each text's least sure aspect; texts that mention none are "
                                                         "left out.", exists=True, dir_okay=False)] = None,
    unit: Annotated[Unit, typer.Option(help="With --aspects: the unit an aspect is answered on.")] = Unit.sentence,
):
    """Pick the reviews worth labelling (uncertain, not duplicated), keeping their ids and columns."""
    quiet()
    from senti.toolkit.surge.selection import Selection, select_file

    with user_errors():
        from senti.core.aspects import read_aspects

        listed = read_aspects(aspects) if aspects is not None else None
        result = select_file(model, input, output, Selection(budget, strategy.value, seed, exclude_labelled, listed,
                                                             unit.value), text_column, trust_pickle)
    notes = [f"{result['excluded_labelled']} already labelled left out" if exclude_labelled else "",
             f"{result['empty']} empty" if result["empty"] else "",
             f"{result['no_aspect']} mention no aspect" if result["no_aspect"] else "",
             f"{result['unreadable']} unreadable skipped (lines {', '.join(map(str, result['unreadable_lines']))}"
             f"{', ...' if result['unreadable'] > len(result['unreadable_lines']) else ''})"
             if result["unreadable"] else ""]
    said = "; ".join(n for n in notes if n)
    console.print(f"{result['picked']} of {result['read']} rows picked by {result['strategy']} -> {output}"
                  f"{f' ({said})' if said else ''}; label them with senti label --input {output} --output labels.jsonl")
