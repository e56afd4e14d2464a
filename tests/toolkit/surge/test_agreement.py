"""`senti label --agreement`: Cohen's kappa per pair and per label equal to scikit-learn's on the same pairs, the raw
agreement, the disagreements written for a third labeller, and one-line refusals."""

from __future__ import annotations

import json
import random

import pytest
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from senti.cli import app
from senti.core.errors import DataError
from senti.toolkit.surge.agreement import agreement


def write_log(path, answers: list[tuple[str, str, str | None, str]], by: str | None = None):
    """answers: (id, text, label, answer)."""
    with path.open("w", encoding="utf-8") as fh:
        for pid, text, label, answer in answers:
            record = {"id": pid, "text": text, "label": label, "answer": answer}
            if by:
                record["by"] = by
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    return path


def test_kappa_per_pair_and_per_label_is_scikit_learns_on_the_texts_both_labelled(tmp_path):
    rng = random.Random(0)
    labels = ["negative", "neutral", "positive"]
    truth = {f"t{i}": rng.choice(labels) for i in range(120)}
    said = {}
    for who, share in (("ann", 0.9), ("bo", 0.8), ("cy", 0.7)):
        ids = rng.sample(sorted(truth), 80)
        said[who] = {i: truth[i] if rng.random() < share else rng.choice(labels) for i in ids}
    log = tmp_path / "team.jsonl"
    lines: list[tuple[str, str, str | None, str, str]] = [(i, f"text {i}", lab, "label", who)
                                                          for who, got in said.items() for i, lab in got.items()]
    rng.shuffle(lines)
    lines.append(("t999", "skipped", None, "skip", "ann"))
    with log.open("w", encoding="utf-8") as fh:
        for pid, text, lab, answer, who in lines:
            fh.write(json.dumps({"id": pid, "text": text, "label": lab, "answer": answer, "by": who}) + "\n")
    report = agreement([log])
    assert report.labellers == {"ann": 80, "bo": 80, "cy": 80}
    for pair in report.pairs:
        common = sorted(set(said[pair.first]) & set(said[pair.second]))
        first, second = [said[pair.first][i] for i in common], [said[pair.second][i] for i in common]
        assert pair.texts == len(common)
        assert pair.kappa == pytest.approx(cohen_kappa_score(first, second))
        assert pair.raw == pytest.approx(sum(a == b for a, b in zip(first, second)) / len(common))
        for lab in labels:
            assert pair.per_label[lab] == pytest.approx(cohen_kappa_score([a == lab for a in first],
                                                                          [b == lab for b in second]))
    differing = {i for p in report.pairs for i in set(said[p.first]) & set(said[p.second])
                 if said[p.first][i] != said[p.second][i]}
    assert {d.id for d in report.disagreements} == differing


def test_two_files_without_names_are_two_labellers_and_the_cli_writes_the_disagreements(tmp_path):
    texts = [(f"r{i}", f"评论{i}") for i in range(10)]
    first = write_log(tmp_path / "ann.jsonl", [(i, t, "positive" if n % 2 else "negative", "label")
                                               for n, (i, t) in enumerate(texts)])
    second = write_log(tmp_path / "bo.jsonl", [(i, t, "positive" if n % 3 else "negative", "label")
                                               for n, (i, t) in enumerate(texts)])
    out = tmp_path / "disagreements.jsonl"
    result = CliRunner().invoke(app, ["label", "--agreement", str(first), "--agreement", str(second), "--output",
                                      str(out)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "ann.jsonl / bo.jsonl" in result.output and "kappa" in result.output
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    expected = [i for n, (i, _) in enumerate(texts) if (n % 2 != 0) != (n % 3 != 0)]
    assert [r["id"] for r in rows] == expected and set(rows[0]["labels"]) == {"ann.jsonl", "bo.jsonl"}


def test_one_labeller_or_no_overlap_is_refused_in_one_line(tmp_path):
    one = write_log(tmp_path / "one.jsonl", [("a", "好", "positive", "label")], by="ann")
    with pytest.raises(DataError, match="agreement needs two"):
        agreement([one])
    other = write_log(tmp_path / "two.jsonl", [("b", "差", "negative", "label")], by="bo")
    with pytest.raises(DataError, match="no text was labelled by two labellers"):
        agreement([one, other])


def test_a_label_log_written_by_a_newer_senti_is_refused_in_one_line(tmp_path):
    from senti.toolkit.data.label_log import resolve_log

    log = tmp_path / "new.jsonl"
    log.write_text(json.dumps({"log_version": 2, "id": "a", "text": "好", "label": "positive", "answer": "label"})
                   + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"new.jsonl:1: a label log line of version 2, written by a newer senti"):
        resolve_log(log)
    with pytest.raises(DataError, match="written by a newer senti"):
        agreement([log])
