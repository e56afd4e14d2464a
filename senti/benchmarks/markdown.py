"""Markdown pieces shared by the report and each suite's section of it."""

from __future__ import annotations


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def number(x, digits=1) -> str:
    return "—" if x is None else f"{x:,.{digits}f}"


def share(record: dict) -> str:
    """fraction_of_ceiling as a percentage, flagged when it beats the ceiling (set at the end of a run)."""
    if record.get("fraction_of_ceiling") is None:
        return "—"
    return f"{record['fraction_of_ceiling']:.1%}" + (" (!)" if record.get("beats_ceiling") else "")
