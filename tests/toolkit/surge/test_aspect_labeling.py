"""`senti label --aspects`: each aspect found in a text labelled by keys in a real browser, the evidence
highlighted as text, answers in the append-only log that `senti aspect-units` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from senti.core.aspects import Aspect
from senti.core.errors import DataError
from senti.toolkit.data.label_log import resolve_aspect_log, resolve_log
from senti.toolkit.surge.labeling import LabelJob, Pick
from tests.helpers import KEY, start_senti

ASPECTS = {"aspects": [{"name": "delivery", "label": "物流", "keywords": ["物流", "快递"]},
                       {"name": "quality", "label": "质量", "keywords": ["质量"]},
                       {"name": "price", "keywords": ["价格"]}]}


def _aspect_file(tmp_path: Path) -> Path:
    path = tmp_path / "aspects.json"
    path.write_text(json.dumps(ASPECTS, ensure_ascii=False), encoding="utf-8")
    return path


def test_aspect_answers_are_checked_and_logged_apart_from_whole_text_labels(tmp_path):
    aspects = [Aspect("delivery", ("物流",)), Aspect("quality", ("质量",))]
    picks = [Pick("a", "物流很快。质量太差了", {"text": "物流很快。质量太差了"}), Pick("b", "很好", {"text": "很好"})]
    job = LabelJob(picks, ["negative", "positive"], tmp_path / "labels.jsonl", aspects=aspects)
    assert [a["name"] for a in job.found(picks[0])] == ["delivery", "quality"] and job.found(picks[1]) == []
    assert job.found(picks[0])[1]["evidence"] == [{"text": "质量太差了", "start": 5, "end": 10, "keyword": "质量"}]
    for bad, why in [({"colour": "positive"}, "not in the job's aspect list"), ({"quality": "great"},
                     "polarity must be one of"), ({}, "needs aspects"), (None, "needs aspects")]:
        with pytest.raises(DataError, match=why):
            job.answer("t", "a", "aspects", aspects=bad)
    job.answer("t", "a", "aspects", aspects={"delivery": "positive", "quality": "negative"})
    job.answer("t", "b", "label", "positive")
    assert resolve_aspect_log(tmp_path / "labels.jsonl") == [
        ("物流很快。质量太差了", {"delivery": "positive", "quality": "negative"}, f"{tmp_path / 'labels.jsonl'}:1")]
    rows, counts = resolve_log(tmp_path / "labels.jsonl")  # the sentence rows leave the aspect answer out
    assert [r[:2] for r in rows] == [("很好", "positive")] and counts["aspect_answers"] == 1
    whole = LabelJob(picks, ["negative", "positive"], tmp_path / "other.jsonl")
    with pytest.raises(DataError, match="start senti label with --aspects"):
        whole.answer("t", "a", "aspects", aspects={"delivery": "positive"})


def test_labelling_aspects_by_keys_highlights_the_evidence_as_text(tmp_path, browser):
    texts = ["快递很慢，<b>质量</b>不错", "价格便宜", "没有提到任何方面"]
    picks = tmp_path / "picks.jsonl"
    picks.write_text("".join(json.dumps({"id": f"r{i}", "text": t}, ensure_ascii=False) + "\n"
                             for i, t in enumerate(texts)), encoding="utf-8")
    log = tmp_path / "labels.jsonl"
    proc, base = start_senti("label", "--input", str(picks), "--output", str(log), "--aspects",
                             str(_aspect_file(tmp_path)), "--unit", "clause", ready="/api/job")
    try:
        browser.execute_cdp_cmd("Network.enable", {})
        browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"X-API-Key": KEY}})
        wait = WebDriverWait(browser, 30)
        browser.get(f"{base}/")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#aspects tr[data-aspect]"))
        rows = browser.find_elements(By.CSS_SELECTOR, "#aspects tr[data-aspect]")
        assert [r.get_attribute("data-aspect") for r in rows] == ["delivery", "quality"]
        assert browser.find_element(By.CSS_SELECTOR, "#text mark.active").text == "快递很慢，"
        assert not browser.find_elements(By.CSS_SELECTOR, "#text b")  # markup in a text stays text
        assert browser.find_element(By.ID, "text").text == texts[0]
        body = browser.find_element(By.TAG_NAME, "body")
        body.send_keys("3")  # delivery: negative; quality comes next, highlighted
        wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#text mark.active").text == "<b>质量</b>不错")
        body.send_keys("1")  # quality: positive, the last aspect: the answer is sent
        wait.until(lambda d: d.find_element(By.ID, "progress").text == "1 / 3")
        assert [r.get_attribute("data-aspect") for r in
                browser.find_elements(By.CSS_SELECTOR, "#aspects tr[data-aspect]")] == ["price"]
        browser.find_element(By.CSS_SELECTOR, '#aspects button[data-polarity="neutral"]').click()
        wait.until(lambda d: d.find_element(By.ID, "progress").text == "2 / 3")
        assert "No aspect of the list" in browser.find_element(By.ID, "aspects").text
        body.send_keys(" ")  # nothing to label: skipped
        wait.until(lambda d: d.find_element(By.ID, "progress").text == "3 / 3")
    finally:
        proc.kill()
        proc.wait()
    said = {r["id"]: (r["answer"], r.get("aspects")) for r in map(json.loads, log.read_text("utf-8").splitlines())}
    assert said == {"r0": ("aspects", {"delivery": "negative", "quality": "positive"}),
                    "r1": ("aspects", {"price": "neutral"}), "r2": ("skip", None)}
