"""`senti audit`: out-of-fold probabilities (n-gram, sentence vectors, a trained model) and confident learning find
the labels flipped on purpose, write suspects.jsonl and audit.json, and refuse what cannot be audited in one line."""

from __future__ import annotations

import json
import random

import pytest
from typer.testing import CliRunner

from senti.cli import app
from senti.core import layout
from senti.toolkit.records import AuditReport
from senti.toolkit.surge.audit import AuditConfig, run_audit
from tests.helpers import synthetic_rows, write_folder, write_rows


def flipped_rows(n: int, share: float, seed: int) -> tuple[list[tuple[str, str]], set[int]]:
    """Synthetic rows with `share` of their labels flipped, and the file lines (header = line 1) flipped."""
    rows = synthetic_rows(n, seed=seed)
    rng = random.Random(seed)
    chosen = set(rng.sample(range(n), round(share * n)))
    other = {"positive": "negative", "negative": "positive"}
    return [(other[lab] if i in chosen else lab, text) for i, (lab, text) in enumerate(rows)], {i + 2 for i in chosen}


def flipped_lines(suspects_file) -> set[int]:
    return {json.loads(line)["line"] for line in suspects_file.read_text(encoding="utf-8").splitlines()}


def test_the_ngram_audit_finds_flipped_labels_and_writes_both_files(tmp_path):
    rows, flipped = flipped_rows(400, 0.08, seed=5)
    data = write_folder(tmp_path / "data", rows, synthetic_rows(60, seed=6))
    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit", "--dataset", str(data), "--split", "train", "--output-dir", str(out)],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "confident joint" in result.output and "estimated noise per label" in result.output
    found = flipped_lines(out / layout.AUDIT_SUSPECTS)
    hits = len(found & flipped)
    assert hits / len(flipped) >= 0.8 and hits / len(found) >= 0.7, (hits, len(found), len(flipped))
    first = json.loads((out / layout.AUDIT_SUSPECTS).read_text(encoding="utf-8").splitlines()[0])
    assert first["rank"] == 1 and first["where"].endswith(f"train.tsv:{first['line']}")
    assert first["suggested"] != first["label"] and 0 < first["score"] <= 1
    report = AuditReport.read(out)
    assert report.source == "ngram" and report.rows == 400 and report.suspects == len(found)
    assert sum(map(sum, report.confident_joint)) <= 400
    again = CliRunner().invoke(app, ["audit", "--dataset", str(data), "--split", "train", "--output-dir", str(out)])
    assert again.exit_code == 2 and "--overwrite" in again.output  # an audit under review is not replaced unasked


def test_fewer_rows_of_a_label_than_folds_is_refused_with_the_counts(tmp_path):
    rows = [("positive", f"好东西{i}号") for i in range(20)] + [("negative", "差劲一号"), ("negative", "差劲二号")]
    path = write_rows(tmp_path / "few.tsv", rows)
    result = CliRunner().invoke(app, ["audit", "--dataset", str(path), "--output-dir", str(tmp_path / "a")],
                                env={"COLUMNS": "300"})
    assert result.exit_code == 2
    assert "needs at least 5 rows per label; 'negative' has 2" in result.output
    assert not (tmp_path / "a").exists()


def test_a_label_log_is_audited_and_its_suspects_name_the_log_lines(tmp_path):
    rows, flipped = flipped_rows(300, 0.05, seed=8)
    log = tmp_path / "labels.jsonl"
    log.write_text("".join(json.dumps({"id": str(i), "text": text, "label": label, "answer": "label"},
                                      ensure_ascii=False) + "\n" for i, (label, text) in enumerate(rows)),
                   encoding="utf-8")
    report, result, audited = run_audit(AuditConfig(str(log), tmp_path / "out"))
    found = {int(audited.where[s.index].rsplit(":", 1)[1]) for s in result.suspects}
    assert len(found & {line - 1 for line in flipped}) >= 0.8 * len(flipped)  # a log has no header line
    assert all(w.startswith(str(log)) for w in audited.where)


def test_sentence_vectors_and_a_model_that_did_not_see_the_rows_audit_too(tiny_checkpoint, tmp_path):
    checkpoint, data = tiny_checkpoint
    rows, flipped = flipped_rows(300, 0.08, seed=21)
    fresh = write_rows(tmp_path / "fresh.tsv", rows)
    _, by_model, _ = run_audit(AuditConfig(str(fresh), tmp_path / "m", "model", checkpoint))
    _, by_vectors, audited = run_audit(AuditConfig(str(fresh), tmp_path / "v", "vectors", checkpoint))
    for result in (by_model, by_vectors):
        lines = {int(audited.where[s.index].rsplit(":", 1)[1]) for s in result.suspects}
        assert len(lines & flipped) >= 0.7 * len(flipped), result.source
    _, both, _ = run_audit(AuditConfig(str(fresh), tmp_path / "b", "both", checkpoint))
    assert {s.index for s in both.suspects} <= {s.index for s in by_model.suspects}


def test_a_model_cannot_audit_the_rows_it_was_trained_on(tiny_checkpoint, tmp_path):
    checkpoint, data = tiny_checkpoint
    with pytest.raises(Exception, match=r"was trained on \d+ of these \d+ rows"):
        run_audit(AuditConfig(str(data), tmp_path / "out", "model", checkpoint, split="train"))
    with pytest.raises(Exception, match="needs --model"):
        AuditConfig(str(data), tmp_path / "out", "vectors")


def test_a_model_fine_tuned_on_each_fold_finds_the_flips_and_leaves_no_fold_behind(tiny_checkpoint, tmp_path):
    rows, flipped = flipped_rows(300, 0.08, seed=13)
    fresh = write_rows(tmp_path / "rows.tsv", rows)
    out = tmp_path / "audit"
    report, result, audited = run_audit(AuditConfig(str(fresh), out, "finetune", tiny_checkpoint[0], folds=3))
    lines = {int(audited.where[s.index].rsplit(":", 1)[1]) for s in result.suspects}
    assert len(lines & flipped) >= 0.7 * len(flipped) and report.source == "finetune" and report.folds == 3
    assert sorted(p.name for p in out.iterdir()) == [layout.AUDIT_REPORT, layout.AUDIT_SUSPECTS]


def test_an_aspect_label_log_is_audited_per_aspect(tmp_path):
    rng = random.Random(4)
    cue = {"service": {"positive": "服务很热情", "negative": "服务太差了"},
           "taste": {"positive": "味道好极了", "negative": "味道难吃死"}}
    log = tmp_path / "aspects.jsonl"
    flipped = set()
    with log.open("w", encoding="utf-8") as fh:
        for i in range(200):
            said = {a: rng.choice(["positive", "negative"]) for a in cue}
            text = "，".join(cue[a][p] for a, p in said.items()) + "".join(rng.choices("这个东西我们昨天买的", k=6))
            if i % 25 == 0:  # 8 rows whose service polarity is the other one
                said["service"] = "negative" if said["service"] == "positive" else "positive"
                flipped.add(i + 1)
            fh.write(json.dumps({"id": str(i), "text": text, "label": None, "answer": "aspects", "aspects": said},
                                ensure_ascii=False) + "\n")
    result = CliRunner().invoke(app, ["audit", "--dataset", str(log), "--output-dir", str(tmp_path / "a")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "service:" in result.output and "taste:" in result.output
    found = flipped_lines(tmp_path / "a" / "service" / layout.AUDIT_SUSPECTS)
    assert len(found & flipped) >= 6 and AuditReport.read(tmp_path / "a" / "service").aspect == "service"
    assert len(flipped_lines(tmp_path / "a" / "taste" / layout.AUDIT_SUSPECTS)) <= 3
