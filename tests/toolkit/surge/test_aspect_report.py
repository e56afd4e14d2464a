"""The per-period aspect report over a file senti aspects answered: counts, negative shares, the jump and its
examples, the plot, and the rows it cannot use."""

from __future__ import annotations

import json

import pytest

from senti.core.errors import DataError
from senti.toolkit.surge.aspect_report import aspect_report, period_of, write_report


def _answer(polarity: str, score: float | None = None, evidence: str = "") -> dict:
    return {"polarity": polarity, "score": score, "evidence": [{"text": evidence}] if evidence else []}


def _rows() -> list[dict]:
    """Three weeks of reviews: delivery is 1 negative in 6 mentions in each of the first two weeks and 5 in 6 in
    the third; price is negative half the time throughout; parking is never mentioned."""
    rows = []
    for week, day in enumerate(("2024-04-29", "2024-05-06", "2024-05-13")):
        bad = 5 if week == 2 else 1
        for i in range(6):
            polarity = "negative" if i < bad else "positive"
            rows.append({"id": f"{week}-{i}", "date": f"{day} 1{i}:00:00", "text": f"第{week}周第{i}条：物流{polarity}",
                         "aspects": {"delivery": _answer(polarity, 0.1 + i / 100 if polarity == "negative" else 0.9,
                                                         f"物流{i}"),
                                     "price": _answer("negative" if i % 2 else "positive", 0.5),
                                     "parking": _answer("not_mentioned")}})
    return rows


def _write(path, rows) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def test_periods_are_iso_days_weeks_and_months_and_anything_else_is_no_date():
    assert period_of("2024-05-01", "day") == "2024-05-01"
    assert period_of("2024-05-01T23:30:00+08:00", "week") == "2024-W18"
    assert period_of("2024-12-30", "week") == "2025-W01"  # ISO weeks: Monday 30 December is week 1 of 2025
    assert period_of("2024-05-31 10:00:00", "month") == "2024-05"
    assert [period_of(v, "day") for v in ("yesterday", "", None, 20240501, "2024-13-01")] == [None] * 5


def test_the_report_counts_by_week_and_names_the_aspect_that_jumped_with_its_worst_reviews(tmp_path):
    answered = tmp_path / "answers.jsonl"
    _write(answered, _rows())
    report = aspect_report(answered, period="week")
    assert report.periods == ["2024-W18", "2024-W19", "2024-W20"] and report.aspects == ["delivery", "price", "parking"]
    assert report.counts["2024-W20"]["delivery"] == {"positive": 1, "neutral": 0, "negative": 5, "not_mentioned": 0}
    assert report.counts["2024-W18"]["parking"]["not_mentioned"] == 6
    assert report.negative_share("2024-W20", "delivery") == pytest.approx(5 / 6)
    assert report.negative_share("2024-W18", "parking") is None  # never mentioned: no share, not 0
    jump = report.jump
    assert jump is not None and jump.aspect == "delivery" and jump.period == "2024-W20"
    assert (jump.share, jump.share_before, jump.mentions, jump.mentions_before) == (0.8333, 0.1667, 6, 12)
    assert jump.interval[0] > 0 and jump.interval[0] < 0.6667 < jump.interval[1]
    assert [e.text for e in jump.examples] == [f"第2周第{i}条：物流negative" for i in range(5)]  # most negative first
    assert jump.examples[0].evidence == ["物流0"] and jump.examples[0].line == 13

    paths = write_report(report, tmp_path / "report")
    saved = json.loads(paths["report"].read_text(encoding="utf-8"))
    assert saved["jump"]["aspect"] == "delivery" and saved["negative_share"]["2024-W20"]["price"] == 0.5
    assert paths["plot"].read_bytes()[:4] == b"\x89PNG"
    assert sorted(p.name for p in (tmp_path / "report").iterdir()) == ["negative_share.png", "report.json"]


def test_no_jump_is_named_on_too_few_mentions_or_one_period(tmp_path):
    answered = tmp_path / "answers.jsonl"
    _write(answered, _rows())
    assert aspect_report(answered, period="week", min_mentions=7).jump is None  # 6 mentions in the last week
    _write(answered, _rows()[12:])
    assert aspect_report(answered, period="week").jump is None  # one week: nothing before it


def test_rows_without_a_date_or_answers_are_left_out_and_counted_and_a_file_with_none_usable_is_one_line(tmp_path):
    answered = tmp_path / "answers.jsonl"
    rows = _rows()
    rows[3]["date"] = "last Tuesday"
    _write(answered, rows)
    with answered.open("a", encoding="utf-8") as out:
        out.write('{"line": 9, "error": "not valid UTF-8"}\n{"text": "没有答案", "date": "2024-05-13"}\nnot json\n')
    report = aspect_report(answered)
    assert report.rows == 21 and sum(report.skipped.values()) == 4
    assert report.first_skipped == "line 4: no ISO date in 'date'"
    assert sum(c["positive"] + c["negative"] for c in (report.counts[p]["delivery"] for p in report.periods)) == 17
    with pytest.raises(DataError, match=r"answers.jsonl: no row has both `aspects` answers and an ISO date in "
                                        r"'when' \(line 1: no ISO date in 'when'\); --date-column names the date"):
        aspect_report(answered, date_column="when")
    with pytest.raises(DataError, match="period must be one of day, week, month"):
        aspect_report(answered, period="year")


def test_senti_aspect_report_prints_the_table_and_the_jump(tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    answered = tmp_path / "answers.jsonl"
    _write(answered, _rows())
    result = CliRunner().invoke(app, ["aspect-report", "--input", str(answered), "--output-dir",
                                      str(tmp_path / "out")], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "jump: delivery negative in 83.3% of 6 mentions in 2024-W20, against 16.7% of 12 before" in result.output
    assert "line 13: 第2周第0条：物流negative" in result.output
    assert (tmp_path / "out" / "negative_share.png").is_file()
    bad = CliRunner().invoke(app, ["aspect-report", "--input", str(answered), "--output-dir", str(tmp_path / "o2"),
                                   "--date-column", "when"], env={"COLUMNS": "200"})
    assert bad.exit_code != 0 and "no row has both" in bad.output and not (tmp_path / "o2").exists()


def _ray_output(folder, rows) -> None:
    """The rows' answers as `senti predict --engine ray --aspects` writes them to JSONL: a folder of part files, each
    line the id, the prediction and `aspect_NAME` / `aspect_NAME_score` columns (no date, no text)."""
    folder.mkdir()
    lines = [json.dumps({"id": r["id"], "label": "positive", "score": 0.9, "error": None,
                         **{f"aspect_{n}": a["polarity"] for n, a in r["aspects"].items()},
                         **{f"aspect_{n}_score": a["score"] for n, a in r["aspects"].items()}}, ensure_ascii=False)
             for r in rows]
    (folder / "part-0.json").write_text("\n".join(lines[:9]) + "\n", encoding="utf-8")
    (folder / "part-1.json").write_text("\n".join(lines[9:]) + "\n", encoding="utf-8")


def test_senti_aspect_report_joins_rays_output_to_the_rows_it_scored_by_id(tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    rows = _rows()
    _ray_output(tmp_path / "answers.jsonl", rows[1:])  # r0 has no answer: left out and counted
    scored = tmp_path / "reviews.jsonl"
    _write(scored, [{k: v for k, v in r.items() if k != "aspects"} for r in rows])
    args = ["aspect-report", "--input", str(tmp_path / "answers.jsonl"), "--output-dir", str(tmp_path / "out")]
    result = CliRunner().invoke(app, [*args, "--rows", str(scored)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "jump: delivery negative in 83.3% of 6 mentions in 2024-W20, against 9.1% of 11 before" in result.output
    assert "line 13: 第2周第0条：物流negative" in result.output  # the line of the file Ray scored
    assert "1 rows left out (first: line 1: id '0-0' has no answers in" in result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert report["counts"]["2024-W20"]["delivery"] == {"positive": 1, "neutral": 0, "negative": 5, "not_mentioned": 0}
    folder = CliRunner().invoke(app, args)
    assert folder.exit_code != 0 and "is a folder: give --rows" in folder.output
    (tmp_path / "plain.jsonl").mkdir()
    (tmp_path / "plain.jsonl" / "part-0.json").write_text('{"id": "0-0", "label": "positive"}\n', encoding="utf-8")
    plain = CliRunner().invoke(app, ["aspect-report", "--input", str(tmp_path / "plain.jsonl"), "--output-dir",
                                     str(tmp_path / "o3"), "--rows", str(scored)], env={"COLUMNS": "200"})
    assert plain.exit_code != 0 and "no aspect_NAME columns" in plain.output


def test_a_ray_part_file_nested_too_deep_is_one_data_error(tmp_path):
    """Ray's JSONL parts are read with the bounded JSON reader every row file goes through: a line of 100,000 "["
    was a RecursionError out of json.loads."""
    from senti.toolkit.surge.aspect_report import ray_joined_rows

    (tmp_path / "answers.jsonl").mkdir()
    (tmp_path / "answers.jsonl" / "part-0.json").write_text("[" * 100_000 + "\n", encoding="utf-8")
    _write(tmp_path / "reviews.jsonl", [{"id": "0-0", "date": "2024-05-06", "text": "好"}])
    with pytest.raises(DataError, match=r"part-0\.json:1: JSON nested deeper than \d+ levels"):
        aspect_report(tmp_path / "answers.jsonl",
                      rows=ray_joined_rows(tmp_path / "answers.jsonl", tmp_path / "reviews.jsonl", "id", None))
