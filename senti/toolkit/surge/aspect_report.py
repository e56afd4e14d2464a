"""Which aspect a surge is about: a report over a file `senti aspects` answered, period by period.

Each row of the answered file (JSONL, as `senti aspects --output` writes it) holds the input row's columns, among
them a date, and an `aspects` object ({name: {polarity, score, evidence}}). The report counts every aspect's
answers of each polarity per period (day, ISO week or month), gives each aspect's negative share per period
(negative answers over the answers that mention it), and names the aspect whose negative share rose most in the
last period against all the periods before it, with the last period's most negative reviews of it as examples.
A jump is named only where both sides have at least `min_mentions` mentions, and it comes with the 95% interval of
the difference (Wald, on the two shares, clipped to [-1, 1]), so a jump of two reviews in three is not read as a surge.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from pathlib import Path

from senti.core.aspects import ASPECT_POLARITIES
from senti.core.errors import DataError

PERIODS = ("day", "week", "month")
DEFAULT_MIN_MENTIONS = 5
EXAMPLES = 5
MENTIONED = ("positive", "neutral", "negative")


def period_of(value: object, period: str) -> str | None:
    """The period a date value falls in ("2024-05-01", "2024-W18", "2024-05"), or None when it is not a date:
    ISO dates and date-times ("2024-05-01", "2024-05-01 12:30:00", "2024-05-01T12:30:00+08:00")."""
    if not isinstance(value, str):
        return None
    try:
        day: date = datetime.fromisoformat(value.strip()).date()
    except ValueError:
        return None
    if period == "day":
        return day.isoformat()
    if period == "week":
        year, week, _ = day.isocalendar()
        return f"{year}-W{week:02d}"
    return f"{day.year}-{day.month:02d}"


@dataclass
class Example:
    line: int  # 1-based line of the answered file
    text: str
    score: float | None  # the aspect's score (mean probability of positive over its evidence)
    evidence: list[str]


@dataclass
class Jump:
    aspect: str
    period: str
    share: float  # negative share in the last period
    share_before: float  # in all the periods before it, pooled
    mentions: int
    mentions_before: int
    interval: tuple[float, float]  # 95% interval of share - share_before
    examples: list[Example] = field(default_factory=list)


@dataclass
class AspectReport:
    period: str
    periods: list[str]
    aspects: list[str]
    counts: dict[str, dict[str, dict[str, int]]]  # period -> aspect -> polarity -> answers
    rows: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # why -> rows
    first_skipped: str | None = None  # "line N: why", the first row left out
    jump: Jump | None = None

    def pooled(self, aspect: str, periods: list[str]) -> dict[str, int]:
        """`aspect`'s answers of each polarity over `periods`, summed."""
        return {p: sum(self.counts[when][aspect][p] for when in periods) for p in ASPECT_POLARITIES}

    def negative_share(self, period: str, aspect: str) -> float | None:
        return share_of(self.counts[period][aspect])

    def to_json(self) -> dict:
        data = asdict(self)
        data["negative_share"] = {p: {a: self.negative_share(p, a) for a in self.aspects} for p in self.periods}
        return data


def mentions(counts: dict[str, int]) -> int:
    """The answers that mention the aspect (any polarity but not_mentioned)."""
    return sum(counts[p] for p in MENTIONED)


def share_of(counts: dict[str, int]) -> float | None:
    """The negative share of the mentions in `counts`, or None without a mention."""
    return counts["negative"] / mentions(counts) if mentions(counts) else None


def _answers_of(record: dict) -> dict | None:
    answers = record.get("aspects")
    if not isinstance(answers, dict) or not all(isinstance(a, dict) and a.get("polarity") in ASPECT_POLARITIES
                                                for a in answers.values()):
        return None
    return answers


class _Reader:
    """The answered rows, each with its period; the rows left out counted by why."""

    def __init__(self, date_column: str, period: str):
        self.date_column, self.period = date_column, period
        self.skipped: dict[str, int] = {}
        self.first_skipped: str | None = None
        self.rows = 0

    def skip(self, line: int, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1
        self.first_skipped = self.first_skipped or f"line {line}: {why}"

    def read(self, rows) -> list[tuple[str, int, str, dict]]:
        """(period, line, text, answers) of every usable row of `rows`, each (line, text, record, error)."""
        kept = []
        for line, text, record, error in rows:
            self.rows += 1
            record = record or {}
            answers = _answers_of(record) if error is None else None
            when = period_of(record.get(self.date_column), self.period)
            if error is not None or answers is None:
                self.skip(line, error or "no `aspects` answers (not a senti aspects output row)")
            elif when is None:
                self.skip(line, f"no ISO date in '{self.date_column}'")
            else:
                kept.append((when, line, text or "", answers))
        return kept


def answered_rows(path: Path, text_column: str | None):
    """(line, text, record, error) of a file `senti aspects` answered."""
    from senti.core.rows import read_rows

    for row in read_rows(path, text_column):
        yield row.line, row.text, row.record, row.error


def ray_joined_rows(output: Path, rows: Path, id_column: str, text_column: str | None):
    """(line, text, record, error) of each row of the input file `rows` that `senti predict --engine ray --aspects`
    scored into `output` (its folder of Parquet or JSONL parts, which hold the id and the answers, not the date):
    the input row with an `aspects` object made of Ray's `aspect_NAME` and `aspect_NAME_score` columns, joined by
    `id_column` (the column given to senti predict as --id-column); `line` is the input file's."""
    from senti.core.rows import read_rows

    answered = _ray_answers(output)
    for row in read_rows(rows, text_column):
        record = row.record or {}
        key = record.get(id_column)
        answers = answered.get(str(key)) if key is not None else None
        why = row.error or (f"no '{id_column}' (--id-column)" if key is None else
                            None if answers else f"id {str(key)[:40]!r} has no answers in {output}")
        yield row.line, row.text, {**record, "aspects": answers} if answers else None, why


def _ray_answers(output: Path) -> dict[str, dict]:
    """{id: {aspect: {polarity, score, evidence}}} from Ray's output folder (or one file of it); rows without
    answers (error rows) left out."""
    table = _ray_table(Path(output))
    answers = {}
    for record in table:
        names = [c[len("aspect_"):] for c in record if c.startswith("aspect_") and f"{c}_score" in record]
        if not names:
            raise DataError(f"{output}: no aspect_NAME columns; score with senti predict --engine ray --aspects")
        if record.get("id") is None or any(record[f"aspect_{n}"] not in ASPECT_POLARITIES for n in names):
            continue
        answers[str(record["id"])] = {n: {"polarity": record[f"aspect_{n}"], "score": record[f"aspect_{n}_score"],
                                          "evidence": []} for n in names}
    return answers


def _ray_table(output: Path) -> list[dict]:
    """Ray's output rows: a Parquet folder or file through pyarrow, a JSONL folder's part files (or one file)
    line by line; only regular files directly inside the folder are read."""
    parts = sorted(p for p in output.iterdir() if p.is_file() and not p.is_symlink()) if output.is_dir() else [output]
    if output.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq

        try:
            return [row for part in parts for row in pq.read_table(part).to_pylist()]
        except Exception as err:  # pyarrow raises assorted types on a damaged file
            raise DataError(f"{output}: not Ray's Parquet output ({type(err).__name__})") from None
    from senti.core.rows import parse_json_line

    rows = []
    for part in parts:
        for n, line in enumerate(part.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if line.strip():
                record, why = parse_json_line(line)  # bounded in depth, as every JSON line senti reads
                if record is None:
                    raise DataError(f"{part}:{n}: {why} (not Ray's JSONL output)")
                rows.append(record)
    return rows


def aspect_report(path: Path, date_column: str = "date", period: str = "week", text_column: str | None = None,
                  min_mentions: int = DEFAULT_MIN_MENTIONS, rows=None) -> AspectReport:
    """The report over the answered file at `path` (see the module's docstring), or over `rows` when given (an
    iterable of (line, text, record, error), as `ray_joined_rows` gives). DataError when no row is usable."""
    if period not in PERIODS:
        raise DataError(f"period must be one of {', '.join(PERIODS)}; got {period!r}")
    reader = _Reader(date_column, period)
    kept = reader.read(answered_rows(Path(path), text_column) if rows is None else rows)
    if not kept:
        raise DataError(f"{path}: no row has both `aspects` answers and an ISO date in '{date_column}' "
                        f"({reader.first_skipped or 'the file is empty'}); --date-column names the date")
    periods = sorted({when for when, *_ in kept})
    aspects = list(dict.fromkeys(name for *_, answers in kept for name in answers))
    counts = {p: {a: dict.fromkeys(ASPECT_POLARITIES, 0) for a in aspects} for p in periods}
    for when, _, _, answers in kept:
        for name, answer in answers.items():
            counts[when][name][answer["polarity"]] += 1
    report = AspectReport(period, periods, aspects, counts, reader.rows, reader.skipped, reader.first_skipped)
    report.jump = _largest_jump(report, min_mentions)
    if report.jump is not None:
        report.jump.examples = _examples(kept, report.jump)
    return report


def _largest_jump(report: AspectReport, min_mentions: int) -> Jump | None:
    """The aspect whose negative share rose most in the last period over the periods before it, pooled; None when
    there is one period, or no aspect has `min_mentions` mentions on both sides, or none rose."""
    if len(report.periods) < 2:
        return None
    last, before = report.periods[-1], report.periods[:-1]
    best = None
    for aspect in report.aspects:
        now, pooled = report.counts[last][aspect], report.pooled(aspect, before)
        n, m = mentions(now), mentions(pooled)
        if n < min_mentions or m < min_mentions:
            continue
        share, share_before = now["negative"] / n, pooled["negative"] / m
        if share <= share_before or (best is not None and share - share_before <= best.share - best.share_before):
            continue
        half = 1.96 * math.sqrt(share * (1 - share) / n + share_before * (1 - share_before) / m)
        difference = share - share_before
        best = Jump(aspect, last, round(share, 4), round(share_before, 4), n, m,
                    (round(max(difference - half, -1.0), 4), round(min(difference + half, 1.0), 4)))
    return best


def _examples(kept: list[tuple[str, int, str, dict]], jump: Jump) -> list[Example]:
    """The last period's reviews answered negative on the jumped aspect, most negative first."""
    found = [Example(line, text, answers[jump.aspect].get("score"),
                     [e.get("text", "") for e in answers[jump.aspect].get("evidence", []) if isinstance(e, dict)])
             for when, line, text, answers in kept
             if when == jump.period and answers.get(jump.aspect, {}).get("polarity") == "negative"]
    found.sort(key=lambda e: (e.score if isinstance(e.score, (int, float)) else 1.0, e.line))
    return found[:EXAMPLES]


def plot_negative_share(report: AspectReport, path: Path, most: int = 10) -> None:
    """Each aspect's negative share per period (the `most` most mentioned aspects, and the jumped one drawn
    thick), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    total = {a: mentions(report.pooled(a, report.periods)) for a in report.aspects}
    shown = sorted((a for a in report.aspects if total[a]), key=lambda a: -total[a])[:most]
    jumped = report.jump.aspect if report.jump else None
    if jumped and jumped not in shown:
        shown.append(jumped)
    fig, ax = plt.subplots(figsize=(max(6.0, 0.6 * len(report.periods) + 3), 4.5))
    for aspect in shown:
        shares = [report.negative_share(p, aspect) for p in report.periods]
        ax.plot(report.periods, [100 * s if s is not None else float("nan") for s in shares], marker="o",
                linewidth=3.0 if aspect == jumped else 1.2, label=aspect + (" (jump)" if aspect == jumped else ""))
    ax.set_ylabel("negative share of mentions, %")
    ax.set_xlabel(report.period)
    ax.set_ylim(0, 100)
    ax.set_title("Negative share by aspect")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.tick_params(axis="x", labelrotation=45)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(report: AspectReport, folder: Path) -> dict[str, Path]:
    """report.json and negative_share.png in `folder` (created); each written aside and renamed into place."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    paths = {"report": folder / "report.json", "plot": folder / "negative_share.png"}
    partial = paths["report"].with_name(".report.json.partial")
    partial.write_text(json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, paths["report"])
    drawn = paths["plot"].with_name(".negative_share.partial.png")
    plot_negative_share(report, drawn)
    os.replace(drawn, paths["plot"])
    return paths
