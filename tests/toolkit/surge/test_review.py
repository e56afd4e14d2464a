"""Reviewing senti audit's suspects: `senti label --review` records keep / change / drop with who and when (by keys
in a real browser), and `senti train --reviewed` trains on the decisions, the dropped rows left out and counted."""

from __future__ import annotations

import json
import random

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from senti.core.errors import DataError
from senti.toolkit.data.splits import load_splits
from senti.toolkit.surge.audit import AuditConfig, run_audit
from senti.toolkit.surge.labeling import LabelJob, open_review, read_picks
from tests.helpers import KEY, start_senti, synthetic_rows, write_folder, write_rows


def audited(tmp_path, n: int = 300, share: float = 0.08):
    """A dataset folder with flipped training labels and its audit: (folder, suspects.jsonl, flipped lines)."""
    rows = synthetic_rows(n, seed=31)
    rng = random.Random(3)
    chosen = set(rng.sample(range(n), round(share * n)))
    other = {"positive": "negative", "negative": "positive"}
    noisy = [(other[lab] if i in chosen else lab, text) for i, (lab, text) in enumerate(rows)]
    data = write_folder(tmp_path / "data", noisy, synthetic_rows(80, seed=32), synthetic_rows(40, seed=33))
    run_audit(AuditConfig(str(data), tmp_path / "audit", split="train"))
    return data, tmp_path / "audit" / "suspects.jsonl", {i + 2 for i in chosen}


def log_lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_decisions_are_logged_with_who_and_when_and_training_reads_them(tmp_path):
    data, suspects, _ = audited(tmp_path)
    log = tmp_path / "review.jsonl"
    job = open_review(suspects, log)
    assert job.review and job.labels == ["negative", "positive"]
    first, second, third = job.picks[:3]
    assert first.given != first.guess  # the given label beside the audit's likeliest
    with pytest.raises(DataError, match="give your name"):
        job.answer("t", first.id, "drop")  # a review records who decided
    with pytest.raises(DataError, match="control characters"):
        job.answer("t", first.id, "drop", by="ann\x1b[31m")
    with pytest.raises(DataError, match="at most 64"):
        job.answer("t", first.id, "drop", by="a" * 65)
    with pytest.raises(DataError, match="answer a review"):
        job.answer("t", first.id, "label", "positive", by="ann")
    job.answer("t", first.id, "drop", by="ann")
    job.answer("t", second.id, "change", by="ann")  # to the audit's likeliest label
    job.answer("t", third.id, "keep", by="bo")
    lines = log_lines(log)
    assert [(r["answer"], r["label"], r["by"], r["given"]) for r in lines] == [
        ("drop", None, "ann", first.given), ("change", second.guess, "ann", second.given),
        ("keep", third.given, "bo", third.given)]
    assert all(r["time"] and r["input"]["where"] == r["id"] for r in lines)

    plain = load_splits(str(data))
    splits = load_splits(str(data), reviewed=str(log))
    assert splits.reviewed is not None and (splits.reviewed.kept, splits.reviewed.changed,
                                             splits.reviewed.dropped) == (1, 1, 1)
    assert len(splits.train) == len(plain.train) - 1
    by_where = {e.where: e.label for e in splits.train}
    assert first.id not in by_where and by_where[second.id] == second.guess and by_where[third.id] == third.given


def test_a_review_that_does_not_match_the_dataset_is_refused(tmp_path):
    data, suspects, _ = audited(tmp_path)
    log = tmp_path / "review.jsonl"
    job = open_review(suspects, log)
    job.answer("t", job.picks[0].id, "drop", by="ann")
    line = int(job.picks[0].id.rsplit(":", 1)[1])
    lines = (data / "train.tsv").read_text(encoding="utf-8").splitlines()
    label, _ = lines[line - 1].split("\t")
    lines[line - 1] = f"{label}\t一段被改过的文字"
    (data / "train.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="holds another text than the one reviewed"):
        load_splits(str(data), reviewed=str(log))
    other = write_folder(tmp_path / "other", synthetic_rows(100, seed=40), synthetic_rows(20, seed=41))
    with pytest.raises(DataError, match="does not hold"):
        load_splits(str(other), reviewed=str(log))
    bad = write_rows(tmp_path / "not-suspects.jsonl", [("positive", "好")])
    with pytest.raises(DataError, match="not a suspect of senti audit"):
        open_review(bad, tmp_path / "r2.jsonl")


def test_senti_train_reads_the_reviewed_rows_and_says_so(tmp_path):
    data, suspects, flipped = audited(tmp_path)
    log = tmp_path / "review.jsonl"
    job = open_review(suspects, log)
    for pick in job.picks:
        job.answer("t", pick.id, "drop", by="ann")
    said: list[str] = []
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    run_training(TrainConfig(model="scratch:tiny", dataset=str(data), output_dir=str(tmp_path / "ckpt"), epochs=1,
                             batch_size=16, lr=1e-3, device="cpu", seed=7, reviewed=str(log), calibrate=False,
                             baseline=False), say=said.append)
    assert any(f"{len(job.picks)} dropped" in s and "reviewed in" in s for s in said), said
    meta = json.loads((tmp_path / "ckpt" / "senti.json").read_text(encoding="utf-8"))
    assert meta["data"]["reviewed"] == str(log.resolve())


def test_a_named_reviewer_decides_by_keys_in_a_real_browser(tmp_path, browser):
    _, suspects, _ = audited(tmp_path)
    log = tmp_path / "review.jsonl"
    proc, base = start_senti("label", "--review", str(suspects), "--output", str(log), ready="/api/job")
    try:
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"X-API-Key": KEY}})
        wait = WebDriverWait(browser, 30)
        browser.get(f"{base}/")
        total = len(read_picks_of(suspects))
        wait.until(lambda d: "give your name" in d.find_element(By.ID, "message").text)  # asked before any text
        browser.find_element(By.TAG_NAME, "body").send_keys("d")  # no text shown, nothing recorded
        assert not log.exists() or not log.read_text(encoding="utf-8")
        name = browser.find_element(By.ID, "name")
        name.send_keys("王芳")
        name.send_keys("\t")
        wait.until(lambda d: d.find_element(By.ID, "progress").text == f"0 / {total}")
        body = browser.find_element(By.TAG_NAME, "body")
        given = browser.find_element(By.ID, "given-label").text
        for n, key in enumerate("dkc"):
            shown = f"{n} / {total}"
            wait.until(lambda d: d.find_element(By.ID, "progress").text == shown)
            body.send_keys(key)
        wait.until(lambda d: d.find_element(By.ID, "progress").text == f"3 / {total}")
        lines = log_lines(log)
        assert [r["answer"] for r in lines] == ["drop", "keep", "change"]
        assert {r["by"] for r in lines} == {"王芳"} and lines[0]["given"] == given
        assert lines[1]["label"] == lines[1]["given"] and lines[2]["label"] == lines[2]["guess"]
    finally:
        proc.kill()
        proc.wait()


def read_picks_of(suspects) -> list:
    return [json.loads(line) for line in suspects.read_text(encoding="utf-8").splitlines()]


def test_review_mode_is_a_label_job_other_answers_do_not_enter(tmp_path):
    picks = write_rows(tmp_path / "picks.jsonl", synthetic_rows(10, seed=2), header=("label", "text"))
    job = LabelJob(read_picks(picks), ["negative", "positive"], tmp_path / "l.jsonl")
    with pytest.raises(DataError, match="answer a review"):
        job.answer("t", job.picks[0].id, "drop")
