"""senti.toolkit.data.aspect_units (`senti aspect-units`): a team's aspect labels as sentence rows, from ASAP's CSV,
JSONL rows and `senti label --aspects`' log; bad labels named by file and line."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from senti.core.aspects import Aspect
from senti.core.errors import DataError
from senti.toolkit.data.aspect_units import write_aspect_units
from tests.helpers import train_tiny

ASPECTS = [Aspect("service", ("服务", "态度")), Aspect("taste", ("味道", "口味"))]
REVIEWS = [("服务很热情。味道一般般，有点咸", "1", "-1"), ("态度差，等了很久。味道还可以", "-1", "1"),
           ("服务周到。口味很好", "1", "1"), ("环境不错", "-2", "-2"), ("服务和味道都很差", "-1", "1")]


def _asap_csv(path: Path, reviews) -> Path:
    with path.open("w", encoding="utf-8-sig", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["id", "reviewbody", "star", "service", "taste"])
        for i, (text, service, taste) in enumerate(reviews):
            writer.writerow([i, text, 4, service, taste])
    return path


def _read(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.split("\t")) for line in path.read_text(encoding="utf-8").splitlines()[1:]]  # type: ignore


def test_asap_csv_gives_each_mentioning_sentence_its_aspects_polarity(tmp_path):
    folder = tmp_path / "asap"
    folder.mkdir()
    _asap_csv(folder / "train.csv", REVIEWS)
    _asap_csv(folder / "dev.csv", [("服务很热情。菜的味道好极了", "1", "1"), ("服务员态度很好", "1", "-2")])
    counts = write_aspect_units(folder, ASPECTS, tmp_path / "units")
    assert _read(tmp_path / "units" / "train.tsv") == [
        ("positive", "服务很热情。"), ("negative", "味道一般般，有点咸"), ("negative", "态度差，等了很久。"),
        ("positive", "味道还可以"), ("positive", "服务周到。"), ("positive", "口味很好")]
    # "服务和味道都很差" names both aspects, labelled both ways: left out, counted
    assert counts["train"].both_ways == 1 and counts["train"].texts == 5
    assert counts["train"].rows == {"positive": 4, "negative": 2} and _read(tmp_path / "units" / "test.tsv") == []
    # dev's "服务很热情。" is a train unit: not scored again
    assert _read(tmp_path / "units" / "dev.tsv") == [("positive", "菜的味道好极了"), ("positive", "服务员态度很好")]
    assert counts["dev"].repeats == 1
    clauses = write_aspect_units(folder, ASPECTS, tmp_path / "clauses", unit="clause")
    assert ("negative", "态度差，") in _read(tmp_path / "clauses" / "train.tsv") and clauses["train"].both_ways == 1


def test_jsonl_and_the_label_pages_log_split_one_file_by_text_and_train(tmp_path):
    rows = [{"text": t.format(i, i), "aspects": {"service": p1, "taste": p2}}
            for i in range(20) for t, p1, p2 in [("服务很好{}。味道很差{}", "positive", "negative"),
                                                 ("态度很差{}。口味不错{}", "negative", "positive")]]
    data = tmp_path / "aspects.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    counts = write_aspect_units(data, ASPECTS, tmp_path / "units", seed=3)
    assert [counts[s].texts for s in ("train", "dev", "test")] == [32, 4, 4]
    train_texts = {t for _, t in _read(tmp_path / "units" / "train.tsv")}
    assert not train_texts & {t for _, t in _read(tmp_path / "units" / "dev.tsv")}  # no text's units in two splits
    trained = train_tiny(tmp_path / "model", tmp_path / "units", epochs=1)
    assert sum(trained["data"]["rows"].values()) == 2 * 40
    log = tmp_path / "labels.jsonl"  # as senti label --aspects writes it: the last answer per id wins
    lines = [{"id": f"r{i}", "text": r["text"], "label": None, "answer": "aspects", "aspects": r["aspects"]}
             for i, r in enumerate(rows)] + [{"id": "r0", "text": rows[0]["text"], "label": None, "answer": "undo"}]
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines), encoding="utf-8")
    assert sum(c.texts for c in write_aspect_units(log, ASPECTS, tmp_path / "from-log").values()) == 39
    again = [{"text": f"服务很好。味道很差{i}", "aspects": {"service": "positive", "taste": "negative"}} for i in range(20)]
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in again), encoding="utf-8")
    counts = write_aspect_units(data, ASPECTS, tmp_path / "repeats", seed=3)  # "服务很好。" is in every text
    assert counts["dev"].repeats == 1 and counts["test"].repeats == 1 and counts["dev"].rows == {"negative": 2}


def test_bad_aspect_labels_are_refused_in_one_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"text": "服务很好", "aspects": {"service": "great"}}, ensure_ascii=False) + "\n",
                   encoding="utf-8")
    with pytest.raises(DataError, match=f"{bad}:1: aspect 'service' is 'great'; expected one of positive"):
        write_aspect_units(bad, ASPECTS, tmp_path / "out")
    flat = tmp_path / "flat.jsonl"
    flat.write_text(json.dumps({"text": "服务很好", "label": "positive"}, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="flat.jsonl:1: expected an \"aspects\" object"):
        write_aspect_units(flat, ASPECTS, tmp_path / "out")
    folder = tmp_path / "only-train"
    folder.mkdir()
    _asap_csv(folder / "train.csv", REVIEWS)
    with pytest.raises(DataError, match="needs a train and a dev file"):
        write_aspect_units(folder, ASPECTS, tmp_path / "out")
    _asap_csv(folder / "dev.csv", [REVIEWS[3]])
    with pytest.raises(DataError, match="the dev split gives no unit rows; train needs positive and negative"):
        write_aspect_units(folder, ASPECTS, tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_senti_aspect_units_from_the_command_line(tmp_path):
    from typer.testing import CliRunner

    from senti.cli import app

    folder = tmp_path / "asap"
    folder.mkdir()
    _asap_csv(folder / "train.csv", REVIEWS)
    _asap_csv(folder / "dev.csv", [("服务员态度很好", "1", "-2")])
    listed = tmp_path / "aspects.json"
    listed.write_text(json.dumps({"aspects": [a.to_json() for a in ASPECTS]}, ensure_ascii=False), encoding="utf-8")
    result = CliRunner().invoke(app, ["aspect-units", "--input", str(folder), "--aspects", str(listed),
                                      "--output-dir", str(tmp_path / "units")], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "next: senti train --model PARENT --dataset" in result.output
    assert (tmp_path / "units" / "dev.tsv").is_file()
