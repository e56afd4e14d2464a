"""`senti label --agreement LOG...`: the agreement table, and the disagreements as texts for a third labeller."""

from __future__ import annotations

import json
from pathlib import Path

from rich.table import Table

from senti.cli.common import console, shown


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def report_agreement(logs: list[Path], output: Path | None) -> None:
    from senti.toolkit.surge.agreement import agreement

    report = agreement(logs)
    console.print("labellers: " + ", ".join(f"{shown(who)} ({n} texts)" for who, n in report.labellers.items()))
    labels = sorted({lab for p in report.pairs for lab in p.per_label})
    table = Table(title="agreement per pair (Cohen's kappa; per label: that label or another)")
    for column in ("labellers", "texts in common", "raw agreement", "kappa", *(f"kappa {lab}" for lab in labels)):
        table.add_column(shown(column), justify="left" if column == "labellers" else "right")
    for p in report.pairs:
        table.add_row(f"{shown(p.first)} / {shown(p.second)}", str(p.texts), f"{p.raw:.3f}", _figure(p.kappa),
                      *(_figure(p.per_label.get(lab)) for lab in labels))
    console.print(table)
    said = f"{len(report.disagreements)} texts labelled differently"
    for d in report.disagreements[:5]:
        said += f"\n  {shown(d.id)}: " + ", ".join(f"{shown(w)} {shown(lab)}" for w, lab in d.labels.items()) + \
                f"  {shown(d.text[:60])}"
    console.print(said, highlight=False)
    if output is not None:
        from senti.core.artifacts import write_text_atomic
        from senti.serving.streaming import check_output

        check_output(None, output, suffixes=(".jsonl",), holds="the disagreements")
        lines = [json.dumps({"id": d.id, "text": d.text, "labels": d.labels,
                             "reason": "labelled " + ", ".join(f"{w}: {lab}" for w, lab in d.labels.items())},
                            ensure_ascii=False) + "\n" for d in report.disagreements]
        write_text_atomic(output, "".join(lines))
        console.print(f"-> {output}: settle them with senti label --input {output} --output settled.jsonl",
                      markup=False)
