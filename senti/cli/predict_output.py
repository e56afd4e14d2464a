"""What `senti predict` prints: the table of a few texts' answers, and what a scored file came to."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from senti.cli.common import console, err_console


def print_counts(predictor, counts: dict, written: tuple, say_to) -> None:
    """What a scored file came to (`counts`: predict_file's), the unsure rows and the drift against dev; `written`:
    the output and the unsure queue (or None)."""
    output, unsure_output = written
    for stale in counts["stale_removed"]:
        err_console.print(f"removed {escape(stale)}: the partial output of an earlier run that was killed")
    say_to.print(f"{counts['rows']} rows in, {counts['rows']} rows out ({output}): {counts['predicted']} scored, "
                  f"{counts['errors']} error rows, {counts['truncated']} truncated")
    if predictor.abstain is not None:
        queued = f"; written to {unsure_output} for senti label" if unsure_output else ""
        say_to.print(f"{counts['unsure']} unsure (score below {predictor.abstain.threshold:.4f}, chosen on dev for "
                     f"{predictor.abstain.target}){queued}", markup=False)
    from senti.serving.drift import describe

    if counts["drift"]["texts"]:
        reference = predictor.meta.reference_stats.to_json() if predictor.meta.reference_stats else None
        say_to.print("drift " + ("against the dev texts recorded at export" if reference else "(the export records "
                                 "no dev figures to compare with)") + ":", markup=False)
        for line in describe(counts["drift"], reference):
            say_to.print(f"  {line}", markup=False, highlight=False)
    if counts["errors"]:
        lines = ", ".join(map(str, counts["error_lines"][:20]))
        more = "" if counts["errors"] <= 20 else f" and {counts['errors'] - 20} more"
        err_console.print(f"[yellow]unreadable rows at lines {lines}{more}; written with their error[/]")


def print_table(predictor, texts: list[str], results) -> None:
    calibrated = "calibrated" if predictor.calibration is not None else "softmax, not calibrated"
    table = Table(title=f"senti predict ({predictor.backend_name}; {calibrated})")
    table.add_column("text")
    table.add_column("label")
    table.add_column("confidence", justify="right")
    for text, p in zip(texts, results):
        table.add_row(escape(text if len(text) <= 60 else text[:57] + "..."), escape(p.label),
                      f"{p.score:.4f}" + (" (cut)" if p.truncated else "") + (" unsure" if p.unsure else ""))
    console.print(table)
