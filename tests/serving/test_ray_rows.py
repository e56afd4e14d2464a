"""The reader of `senti predict --engine ray`: numbered blocks streamed from JSONL, CSV and Parquet files, and the
driver's row counts that number them."""

from __future__ import annotations

import json
import os

import pytest

ray = pytest.importorskip("ray", reason="Ray Data is the optional 'scale' extra")
pa = pytest.importorskip("pyarrow")

from senti.core.errors import SentiError  # noqa: E402
from senti.core.rows import read_rows  # noqa: E402
from senti.serving.ray_rows import NumberedRows, count_rows  # noqa: E402


@pytest.fixture(scope="module")
def local_ray():
    """A Ray started as senti starts it: every server on loopback (ray.init alone listened on every interface)."""
    from senti.serving.ray_predict import start_local_ray

    start_local_ray(ray, 1)
    yield
    ray.shutdown()


def _blocks(path, kind, first=0, rows=100, text_column="text", id_column=None):
    source = NumberedRows([str(path)], kind, [first], text_column, id_column, rows)
    import pyarrow.fs as fs

    with source._open_input_source(fs.LocalFileSystem(), os.path.realpath(path)) as f:
        return list(source._read_stream(f, str(path)))


def _awkward_jsonl(path, n: int, trailing_newline: bool) -> dict[int, str]:
    """n rows: good ones, and the kinds of bad line senti predict makes error rows of; returns the bad rows."""
    lines, bad = [], {}
    for i in range(n):
        if i == 3:
            lines.append(b"")
            bad[i] = "empty line"
        elif i == 7:
            lines.append(b'{"text": broken')
            bad[i] = "invalid JSON"
        elif i == 11:
            lines.append(b'{"text": "\xff\xfe"}')
            bad[i] = "not valid UTF-8"
        elif i == 13:  # a line separator inside a JSON string: splitlines() cut this line in two
            lines.append(json.dumps({"text": "好\u2028评"}, ensure_ascii=False).encode() + b"\r")
        else:
            lines.append(json.dumps({"text": f"第{i}条 很好"}, ensure_ascii=False).encode())
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + (b"\n" if trailing_newline else b""))
    return bad


@pytest.mark.parametrize("trailing_newline", [True, False])
def test_a_file_streams_in_numbered_blocks_with_senti_predicts_row_rules(local_ray, tmp_path, trailing_newline):
    src = tmp_path / "in.jsonl"
    bad = _awkward_jsonl(src, 1050, trailing_newline)
    assert count_rows(str(src), ".jsonl", "text", None) == 1050
    blocks = _blocks(src, ".jsonl", first=500, rows=100)
    assert [b.num_rows for b in blocks] == [100] * 10 + [50]  # a block at a time, never the whole file
    rows = pa.concat_tables(blocks).to_pylist()
    assert [r["_row"] for r in rows] == [str(500 + i) for i in range(1050)]
    local = list(read_rows(src, "text"))  # senti predict's own reading of the same file
    for i, (row, mine) in enumerate(zip(rows, local)):
        assert (row["text"], row["_error"]) == (mine.text, mine.error)
        assert (row["_error"] or "").startswith(bad.get(i, "")) and (row["_error"] is None) == (i not in bad)
    assert rows[13]["text"] == "好\u2028评"


def test_ids_are_read_from_the_id_column_as_text(local_ray, tmp_path):
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 7, "text": "好"}\n{"text": "差"}\n{"id": "a-1", "text": "还行"}\n', encoding="utf-8")
    rows = pa.concat_tables(_blocks(src, ".jsonl", id_column="id")).to_pylist()
    assert [r["id"] for r in rows] == ["7", None, "a-1"]  # the scorer makes the missing id an error row


def test_a_line_that_cannot_be_read_says_where_it_is_when_ids_come_from_a_column(local_ray, tmp_path):
    # Its id is unknowable: the row went out as id null with an error that did not say which line it was.
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 7, "text": "好"}\n{"id": 8, "text": broken\n', encoding="utf-8")
    rows = pa.concat_tables(_blocks(src, ".jsonl", id_column="id")).to_pylist()
    assert rows[0]["_error"] is None and rows[1]["id"] is None
    assert rows[1]["_error"].startswith("in.jsonl:2: invalid JSON")


def test_csv_rows_are_counted_by_the_reader_itself(local_ray, tmp_path):
    src = tmp_path / "in.csv"
    src.write_text('id,text\n1,"一行\n两行"\n2,好\n\n3,差\n', encoding="utf-8")
    assert count_rows(str(src), ".csv", "text", "id") == 4  # a quoted newline is not a row; a blank line is one
    rows = pa.concat_tables(_blocks(src, ".csv", rows=3)).to_pylist()
    assert [(r["_row"], r["text"], r["_error"]) for r in rows] == [
        ("0", "一行\n两行", None), ("1", "好", None), ("2", None, "empty line"), ("3", "差", None)]


def test_parquet_is_read_in_blocks_of_the_asked_rows(local_ray, tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": [f"第{i}条" for i in range(250)], "n": list(range(250))}), tmp_path / "a.parquet")
    assert count_rows(str(tmp_path / "a.parquet"), ".parquet", "text", "n") == 250
    blocks = _blocks(tmp_path / "a.parquet", ".parquet", rows=100, id_column="n")
    assert [b.num_rows for b in blocks] == [100, 100, 50]
    assert pa.concat_tables(blocks).column("n").to_pylist() == [str(i) for i in range(250)]


def test_what_cannot_be_read_as_asked_is_named_before_ray_starts(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"review": ["好"]}), tmp_path / "a.parquet")
    with pytest.raises(SentiError, match=r"a\.parquet: no text column 'text' \(columns: review\)"):
        count_rows(str(tmp_path / "a.parquet"), ".parquet", "text", None)
    with pytest.raises(SentiError, match=r"a\.parquet: no id column 'rid'"):
        count_rows(str(tmp_path / "a.parquet"), ".parquet", "review", "rid")
    (tmp_path / "b.jsonl").write_text('not json\n{"review": "好"}\n', encoding="utf-8")
    with pytest.raises(SentiError, match=r"b\.jsonl:1: no text column 'text'"):
        count_rows(str(tmp_path / "b.jsonl"), ".jsonl", "text", None)


def test_a_big_file_is_never_held_whole(local_ray, tmp_path):
    """Ray's read_text held a whole file in one worker (a 10-million-line file, gigabytes): the reader's memory
    is one block's, whatever the file's size."""
    import tracemalloc

    src = tmp_path / "big.jsonl"
    line = json.dumps({"text": "物流很快，包装完好，质量不错，下次还会再来买。" * 3}, ensure_ascii=False) + "\n"
    with src.open("w", encoding="utf-8") as fh:
        for _ in range(200_000):
            fh.write(line)
    size_mb = src.stat().st_size / 2**20
    source = NumberedRows([str(src)], ".jsonl", [0], "text", None, 1000)
    import pyarrow.fs as fs

    rows = 0
    tracemalloc.start()
    with source._open_input_source(fs.LocalFileSystem(), os.path.realpath(src)) as f:
        for block in source._read_stream(f, str(src)):
            rows += block.num_rows
    peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    assert rows == 200_000 and size_mb > 30
    assert peak_mb < 8, f"reading a {size_mb:.0f} MB file held {peak_mb:.1f} MB of Python objects at once"
