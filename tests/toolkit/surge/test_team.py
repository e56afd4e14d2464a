"""`senti label` for a team: named labellers in two browser windows, a share of the texts given to both, the
agreement (equal to scikit-learn's kappa), a third window settling the disagreements, and training reading the
settled labels; a page beyond loopback is refused without a key."""

from __future__ import annotations

import json

import httpx
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from sklearn.metrics import cohen_kappa_score
from typer.testing import CliRunner

from senti.cli import app
from senti.toolkit.data.label_log import labeller_answers
from senti.toolkit.data.splits import load_all_rows
from senti.toolkit.surge.agreement import agreement
from tests.helpers import KEY, start_senti, synthetic_rows


def picks_file(path, n: int = 30):
    rows = synthetic_rows(n, seed=44)
    path.write_text("".join(json.dumps({"id": f"r{i}", "text": text}, ensure_ascii=False) + "\n"
                            for i, (_, text) in enumerate(rows)), encoding="utf-8")
    return {text: label for label, text in rows}


def window(browser, base: str, name: str) -> str:
    """A new window on the page under `name`; returns its handle."""
    browser.switch_to.new_window("window")
    browser.execute_cdp_cmd("Network.enable", {})  # the key header is set per window
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"X-API-Key": KEY}})
    browser.get(f"{base}/")
    box = WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "name"))
    box.clear()
    box.send_keys(name)
    box.send_keys("\t")
    WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "progress").text.count("/") == 1)
    return browser.current_window_handle


def answer_one(browser, handle: str, key_for) -> bool:
    """In window `handle`, answer the text shown with key_for(text); False when it shows none (every text done, or
    the rest with the other labeller: the page looks again by itself)."""
    browser.switch_to.window(handle)
    wait = WebDriverWait(browser, 30)
    wait.until(lambda d: d.find_element(By.ID, "text").text or d.find_element(By.ID, "finished").is_displayed()
               or d.find_element(By.ID, "waiting").is_displayed())
    if not browser.find_element(By.ID, "text").text:
        return False
    text = browser.find_element(By.ID, "text").text
    browser.find_element(By.TAG_NAME, "body").send_keys(key_for(text))
    wait.until(lambda d: d.find_element(By.ID, "text").text != text or d.find_element(By.ID, "finished").is_displayed())
    return True


def test_two_labellers_an_overlap_agreement_and_a_third_who_settles(tmp_path, browser):
    picks, log = tmp_path / "picks.jsonl", tmp_path / "team.jsonl"
    truth = picks_file(picks)
    key = {"negative": "1", "positive": "2"}
    opposite = {"negative": "2", "positive": "1"}
    proc, base = start_senti("label", "--input", str(picks), "--output", str(log), "--labels", "negative,positive",
                             "--overlap", "0.2", ready="/api/job")
    try:
        ann, bo = window(browser, base, "ann"), window(browser, base, "bo")
        flips = [0]

        def bo_key(text: str) -> str:  # bo gives every third text he labels the other label
            flips[0] += 1
            return opposite[truth[text]] if flips[0] % 3 == 0 else key[truth[text]]

        for _ in range(200):  # bounded: 36 answers in all
            answered = [answer_one(browser, handle, key_for)
                        for handle, key_for in ((ann, lambda t: key[truth[t]]), (bo, bo_key))]
            if not any(answered) and browser.find_element(By.ID, "finished").is_displayed():
                break
        said = labeller_answers(log)
        assert len(said) == 30 and sum(len(got) == 2 for got in said.values()) == 6  # 20% for two labellers
        assert {who for got in said.values() for who in got} == {"ann", "bo"}
    finally:
        proc.kill()
        proc.wait()

    report = agreement([log])
    pair = report.pairs[0]
    shared = sorted(pid for pid, got in said.items() if len(got) == 2)
    first = [said[pid]["ann"][0]["label"] for pid in shared]
    second = [said[pid]["bo"][0]["label"] for pid in shared]
    assert (pair.first, pair.second, pair.texts) == ("ann", "bo", 6)
    assert pair.kappa == cohen_kappa_score(first, second) or (pair.kappa is None and len(set(first + second)) < 2)
    disputed = {pid for pid, a, b in zip(shared, first, second) if a != b}
    assert {d.id for d in report.disagreements} == disputed
    result = CliRunner().invoke(app, ["label", "--agreement", str(log)], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "ann / bo" in result.output

    rows = {e.text: e.label for e in load_all_rows(str(log))}
    unsettled = {said[pid]["ann"][0]["text"] for pid in disputed}
    assert not unsettled & set(rows)  # labelled differently: not trained on until settled
    assert disputed  # bo gave every third text he labelled the other label
    proc, base = start_senti("label", "--input", str(picks), "--output", str(log), "--labels", "negative,positive",
                             "--review", "disagreements", ready="/api/job")
    try:
        cy = window(browser, base, "cy")
        assert browser.find_element(By.ID, "progress").text == f"0 / {len(disputed)}"
        assert "ann" in browser.find_element(By.ID, "said-labels").text
        while answer_one(browser, cy, lambda t: key[truth[t]]):
            pass
    finally:
        proc.kill()
        proc.wait()
    rows = {e.text: e.label for e in load_all_rows(str(log))}
    for text in unsettled:
        assert rows[text] == truth[text]  # the settled label is what training reads
    settles = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()
               if json.loads(line)["answer"] == "settle"]
    assert len(settles) == len(disputed) and {s["by"] for s in settles} == {"cy"}


def test_a_page_beyond_loopback_without_a_key_is_refused_before_it_listens(tmp_path):
    picks = tmp_path / "picks.jsonl"
    picks_file(picks, 4)
    result = CliRunner().invoke(app, ["label", "--input", str(picks), "--output", str(tmp_path / "l.jsonl"),
                                      "--labels", "a,b", "--host", "0.0.0.0"], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "beyond loopback" in result.output
    assert not (tmp_path / "l.jsonl").exists()


def test_a_request_without_the_key_records_nothing(tmp_path):
    picks, log = tmp_path / "picks.jsonl", tmp_path / "l.jsonl"
    picks_file(picks, 4)
    proc, base = start_senti("label", "--input", str(picks), "--output", str(log), "--labels", "negative,positive",
                             ready="/api/job")
    try:
        answer = {"tab": "t", "id": "r0", "answer": "label", "label": "negative", "by": "mallory"}
        assert httpx.post(f"{base}/api/answer", json=answer).status_code == 401
        assert httpx.post(f"{base}/api/answer", json=answer, headers={"X-API-Key": "wrong"}).status_code == 401
        assert not log.exists() or log.read_text(encoding="utf-8") == ""
    finally:
        proc.kill()
        proc.wait()
