"""senti.core.rows: the one table of row-file suffixes and the row reader for each of them."""

from __future__ import annotations

import json

import pytest

from senti.core.errors import DataError
from senti.core.rows import INPUT_SUFFIXES, LABELLED_SUFFIXES, ROW_FORMATS, parse_json_line, read_rows, suffixes


def test_the_suffix_table_answers_what_each_format_is_for():
    assert INPUT_SUFFIXES == suffixes("rows") and set(LABELLED_SUFFIXES) <= set(INPUT_SUFFIXES)
    assert ".txt" in INPUT_SUFFIXES and ".txt" not in LABELLED_SUFFIXES  # one text a line: no label column
    assert set(suffixes("ray")) <= set(ROW_FORMATS) and ".parquet" in suffixes("ray")


@pytest.mark.parametrize("suffix", ["tsv", "csv", "jsonl", "txt"])
def test_each_input_format_reads_the_same_texts(tmp_path, suffix):
    texts = ["很好", "太差了", "一般, 还行"]
    path = tmp_path / f"rows.{suffix}"
    if suffix == "tsv":
        path.write_text("label\ttext_a\n" + "".join(f"1\t{t}\n" for t in texts), encoding="utf-8")
    elif suffix == "csv":
        path.write_text("label,text\n" + "".join(f'1,"{t}"\n' for t in texts), encoding="utf-8")
    elif suffix == "jsonl":
        path.write_text("".join(json.dumps({"text": t, "label": "1"}, ensure_ascii=False) + "\n" for t in texts),
                        encoding="utf-8")
    else:
        path.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    rows = list(read_rows(path))
    assert [r.text for r in rows] == texts and [r.line for r in rows] == ([2, 3, 4] if suffix in ("tsv", "csv")
                                                                          else [1, 2, 3])


def test_an_unknown_suffix_and_a_bad_json_line_are_named(tmp_path):
    (tmp_path / "x.xlsx").write_bytes(b"")
    with pytest.raises(DataError, match="unsupported file type '.xlsx'"):
        list(read_rows(tmp_path / "x.xlsx"))
    assert parse_json_line('{"text": "好"}') == ({"text": "好"}, None)
    record, why = parse_json_line("[1, 2]")
    assert record is None and why


def test_a_quoted_csv_field_keeps_its_newlines(tmp_path):
    """The reader stripped every line's end before the csv module saw it: "一行\\n两行" came back "一行两行"."""
    src = tmp_path / "in.csv"
    src.write_bytes('text,label\n"一行\n两行",1\n"a\r\nb",0\n好,1\n'.encode())
    rows = list(read_rows(src, with_labels=True))
    assert [(r.line, r.text, r.label) for r in rows] == [(2, "一行\n两行", "1"), (4, "a\nb", "0"), (6, "好", "1")]


def test_a_csv_whose_header_the_csv_module_cannot_parse_is_one_data_error(tmp_path):
    """A stray carriage return before the header raised the csv module's own error (found by the damage test)."""
    src = tmp_path / "in.csv"
    src.write_bytes("\rlabel,text\r\npositive,好\r\n".encode())
    with pytest.raises(DataError, match=r"in\.csv: line 1: unreadable CSV header"):
        list(read_rows(src, with_labels=True))
