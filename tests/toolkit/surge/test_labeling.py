"""`senti label`: the audit log (append, fsync, undo, resume, a cut last line), its use by `senti train` and
`senti select`, bad input, and the page driven by keys in a real browser through a SIGKILL and a restart."""

from __future__ import annotations

import base64
import json
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from senti.core.errors import DataError
from senti.toolkit.data.label_log import resolve_log
from senti.toolkit.data.splits import load_splits
from senti.toolkit.surge.labeling import LabelJob, open_job, read_picks
from tests.helpers import KEY, assert_only_own_scripts, free_port, start_senti, synthetic_rows, train_tiny, write_rows


def picks_file(path: Path, n: int = 30, seed: int = 5) -> tuple[Path, list[tuple[str, str]]]:
    """A picks file as senti select writes it: id, text, guess, confidence, reason."""
    rows = synthetic_rows(n, seed=seed)
    with path.open("w", encoding="utf-8") as fh:
        for i, (label, text) in enumerate(rows):
            guess = label if i % 3 else ("negative" if label == "positive" else "positive")
            fh.write(json.dumps({"id": f"r{i}", "text": text, "line": i + 1, "guess": guess, "confidence": 0.6,
                                 "score": 0.2, "reason": "margin 0.200"}, ensure_ascii=False) + "\n")
    return path, rows


def log_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_answers_undo_and_resume_are_an_append_only_log(tmp_path):
    picks, rows = picks_file(tmp_path / "picks.jsonl", 6)
    log = tmp_path / "labels.jsonl"
    job = LabelJob(read_picks(picks), ["negative", "positive"], log, "v1")
    first = job.next_for("tab-a")
    assert first.id == "r0" and job.next_for("tab-b").id == "r1"  # two tabs never hold the same text
    with pytest.raises(DataError, match="another tab"):
        job.answer("tab-b", "r0", "label", "positive")
    job.answer("tab-a", "r0", "reject")  # r0's guess is wrong (i % 3 == 0): reject means the other label
    assert job.next_for("tab-a").id == "r2"
    job.answer("tab-a", "r2", "skip")
    assert job.undo("tab-a").id == "r2"  # the skip is taken back; r2 comes back to this tab
    job.answer("tab-a", "r2", "accept")
    with pytest.raises(DataError, match="not one of"):
        job.answer("tab-a", "r3", "label", "neutral")
    assert [(r["id"], r["answer"], r["label"]) for r in log_lines(log)] == [
        ("r0", "reject", rows[0][0]), ("r2", "skip", None), ("r2", "undo", None), ("r2", "accept", rows[2][0])]
    assert log_lines(log)[0]["model_version"] == "v1" and log_lines(log)[0]["input"]["reason"] == "margin 0.200"

    # A kill during a write leaves half a line: the job cuts it and resumes at the first text with no answer.
    with log.open("a", encoding="utf-8") as fh:
        fh.write('{"id": "r1", "text": "半')
    again = LabelJob(read_picks(picks), ["negative", "positive"], log, "v1")
    assert again.repaired > 0 and log.read_text(encoding="utf-8").endswith("}\n")
    assert again.done() == 2 and again.next_for("tab-c").id == "r1"
    assert [r["id"] for r in again.recent()] == ["r2", "r0"]

    texts, counts = resolve_log(log)
    assert [(t, lab) for t, lab, _ in texts] == [(rows[0][1], rows[0][0]), (rows[2][1], rows[2][0])]
    assert counts == {"lines": 4, "texts": 2, "labelled": 2, "skipped": 0, "undone": 0, "aspect_answers": 0,
                      "disagreed": 0, "settled": 0}


def test_bad_input_is_refused_in_one_line(tmp_path, _exported):
    picks, _ = picks_file(tmp_path / "picks.jsonl", 4)
    other, _ = picks_file(tmp_path / "other.jsonl", 4, seed=99)
    log = tmp_path / "labels.jsonl"
    job = LabelJob(read_picks(other), ["negative", "positive"], log)
    job.answer("t", job.next_for("t").id, "label", "positive")
    with pytest.raises(DataError, match="belongs to another job"):
        open_job(picks, log, labels="negative,positive")
    (tmp_path / "empty.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DataError, match="no texts to label"):
        open_job(tmp_path / "empty.jsonl", tmp_path / "x.jsonl", labels="a,b")
    with pytest.raises(DataError, match="not among the model's labels"):
        open_job(picks, tmp_path / "y.jsonl", model=_exported[0], labels="negative,neutral")
    with pytest.raises(DataError, match="is the input file"):
        open_job(picks, picks, labels="negative,positive")
    with pytest.raises(DataError, match="say the label names"):
        open_job(tmp_path / "picks.jsonl", tmp_path / "z.jsonl")
    with pytest.raises(DataError, match="an empty label name"):  # it was accepted, with a label ""
        open_job(picks, tmp_path / "e.jsonl", labels="negative,,positive")
    with pytest.raises(DataError, match=r"cannot hold the answers and who gave them\)$"):  # not predict's "scores"
        open_job(picks, tmp_path / "o.txt", labels="negative,positive")
    (tmp_path / "dup.jsonl").write_text('{"id": 1, "text": "好"}\n{"id": 1, "text": "坏"}\n', encoding="utf-8")
    with pytest.raises(DataError, match="dup.jsonl:2: id '1' again"):
        read_picks(tmp_path / "dup.jsonl")
    # Guesses come from the model when the picks carry none; its label names are the job's.
    plain = write_rows(tmp_path / "plain.tsv", [("x", "很满意 推荐购买"), ("y", "太差了 退货了")], header=("id", "text"))
    job = open_job(plain, tmp_path / "w.jsonl", model=_exported[0])
    assert job.labels == ["negative", "positive"] and [p.guess for p in job.picks] == ["positive", "negative"]


def test_select_on_a_pool_of_only_bad_rows_names_the_first_bad_line(tmp_path, _exported):
    """It said "no texts to choose from" and named no line at all."""
    from senti.toolkit.surge.selection import Selection, select_file

    pool = tmp_path / "pool.tsv"
    pool.write_text("a\tb\ttext\n1\t2\n3\t4\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"pool.tsv: no texts to choose from \(2 unreadable, from line 2: expected 3 "
                                        r"columns"):
        select_file(_exported[0], pool, tmp_path / "picks.jsonl", Selection(5))


def test_select_writes_guesses_and_leaves_out_labelled_texts(tmp_path, _exported):
    from senti.toolkit.surge.selection import Selection, select_file

    pool = write_rows(tmp_path / "pool.tsv", [(str(i), t) for i, (_, t) in enumerate(synthetic_rows(40, seed=8))],
                      header=("id", "text"))
    first = select_file(_exported[0], pool, tmp_path / "picks.jsonl", Selection(5))
    picks = read_picks(tmp_path / "picks.jsonl")
    assert first["picked"] == 5 and all(p.guess in ("negative", "positive") and 0.5 <= (p.confidence or 0) <= 1 for p in picks)
    job = LabelJob(picks, ["negative", "positive"], tmp_path / "labels.jsonl")
    for p in picks[:3]:
        job.answer("t", p.id, "accept")
    job.answer("t", picks[3].id, "skip")
    second = select_file(_exported[0], pool, tmp_path / "more.jsonl", Selection(40, exclude=tmp_path / "labels.jsonl"))
    again = {p.text for p in read_picks(tmp_path / "more.jsonl")}
    assert second["excluded_labelled"] == 3 and not again & {p.text for p in picks[:3]} and picks[3].text in again


@pytest.fixture
def label_server(tmp_path):
    """`senti label` as a real process; call it again to restart on the same files."""
    procs = []
    port = free_port()

    def start(picks: Path, log: Path) -> tuple[str, subprocess.Popen]:
        proc, base = start_senti("label", "--input", str(picks), "--output", str(log), "--labels",
                                 "negative,positive", port=port, ready="/api/job")
        procs.append(proc)
        return base, proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_labelling_twenty_texts_by_keys_survives_sigkill_and_trains(tmp_path, browser, label_server):
    picks, rows = picks_file(tmp_path / "picks.jsonl", 30)
    log = tmp_path / "labels.jsonl"
    base, proc = label_server(picks, log)
    assert httpx.get(f"{base}/").status_code == 401  # the key is asked for by the browser (Basic)
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {
        "Authorization": "Basic " + base64.b64encode(f"me:{KEY}".encode()).decode()}})
    wait = WebDriverWait(browser, 30)
    truth = {f"r{i}": label for i, (label, _) in enumerate(rows)}
    page = browser.find_element

    def at(n_done: int) -> str:  # wait for the page to show `n_done` answered; return the text's id shown
        wait.until(lambda d: d.find_element(By.ID, "progress").text == f"{n_done} / 30")
        text = page(By.ID, "text").text
        return next(f"r{i}" for i, (_, t) in enumerate(rows) if t == text)

    def key(k: str) -> None:
        browser.find_element(By.TAG_NAME, "body").send_keys(k)

    browser.get(f"{base}/")
    expected: list[tuple[str, str, str | None]] = []  # (id, answer, label) in log order
    for n in range(20):
        shown = at(n)
        guess = page(By.ID, "guess-label").text
        if n % 5 == 4:
            key(" ")
            expected.append((shown, "skip", None))
        elif n % 2:  # the guess is right: accept it (a); wrong: reject it (x)
            key("a" if guess == truth[shown] else "x")
            expected.append((shown, "accept" if guess == truth[shown] else "reject", truth[shown]))
        else:
            key("1" if truth[shown] == "negative" else "2")
            expected.append((shown, "label", truth[shown]))
    assert at(20) == "r20"
    key(Keys.BACKSPACE)  # undo the last answer (r19, a skip): it comes back
    assert at(19) == "r19"
    expected.append(("r19", "undo", None))
    key("2" if truth["r19"] == "positive" else "1")
    expected.append(("r19", "label", truth["r19"]))
    assert at(20) == "r20"
    recent = browser.find_elements(By.CSS_SELECTOR, "#recent tr")
    assert len(recent) == 10 and recent[0].get_attribute("data-id") == "r19"

    browser.refresh()  # a reload resumes at the same text
    assert at(20) == "r20"
    # Two tabs: the second is given another text than the one this tab holds.
    other = httpx.post(f"{base}/api/next", json={"tab": "other"}, headers={"X-API-Key": KEY}).json()["item"]["id"]
    assert other == "r21"

    proc.send_signal(signal.SIGKILL)
    proc.wait()
    base, _ = label_server(picks, log)
    browser.get(f"{base}/")
    assert at(20) in ("r20", "r21")  # the other tab's hold did not survive the kill: either is next
    lines = log_lines(log)
    assert [(r["id"], r["answer"], r["label"]) for r in lines] == expected
    assert all(r["text"] == rows[int(r["id"][1:])][1] for r in lines)

    # senti train reads the log as it is: skipped and superseded answers left out.
    splits = load_splits(str(log), seed=1)
    assert len(splits.train) + len(splits.dev) + len(splits.test) == 17  # 20 answered, 4 skips of which 1 undone
    trained = train_tiny(tmp_path / "model", log, epochs=1)
    assert sum(trained["data"]["rows"].values()) == 17
    assert (tmp_path / "model" / "model.safetensors").is_file()


def test_a_huge_text_scrolls_and_markup_stays_text(tmp_path, browser, label_server):
    hostile = '<script>document.title="owned"</script><b>加粗</b>'
    picks = tmp_path / "picks.jsonl"
    picks.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                             for i, t in enumerate(["很好" * 50_000, hostile])), encoding="utf-8")
    base, _ = label_server(picks, tmp_path / "labels.jsonl")
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"X-API-Key": KEY}})
    wait = WebDriverWait(browser, 30)
    browser.get(f"{base}/")
    box = wait.until(lambda d: d.find_element(By.ID, "text") if d.find_element(By.ID, "progress").text == "0 / 2"
                     else None)
    assert browser.execute_script("return arguments[0].scrollHeight > 5 * arguments[0].clientHeight", box)
    started = time.monotonic()
    browser.find_element(By.TAG_NAME, "body").send_keys("2")
    wait.until(lambda d: d.find_element(By.ID, "progress").text == "1 / 2")
    assert time.monotonic() - started < 5
    assert browser.find_element(By.ID, "text").text == hostile and browser.title == "senti label"
    assert not browser.find_elements(By.CSS_SELECTOR, "#text b, #text script")
    assert [r["label"] for r in log_lines(tmp_path / "labels.jsonl")] == ["positive"]


def test_a_tab_takes_back_its_own_answer_not_another_tabs(tmp_path):
    # Within one server, tab A's undo took back tab B's answer (the most recent of all).
    picks, _ = picks_file(tmp_path / "picks.jsonl", n=6)
    job = LabelJob(read_picks(picks), ["negative", "positive"], tmp_path / "labels.jsonl")
    job.answer("tab-a", job.next_for("tab-a").id, "label", "positive")  # r0 by A
    job.answer("tab-b", job.next_for("tab-b").id, "label", "negative")  # r1 by B, the most recent
    assert job.undo("tab-a").id == "r0"
    assert job.last["r1"]["answer"] == "label" and job.done() == 1
    assert job.undo("tab-c") is None  # a tab with no answer of its own takes back nobody's


def _holding(picks, log) -> subprocess.Popen:
    """Another process with a label job open on `log` (its lock held), once it says so."""
    import sys

    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from senti.toolkit.surge.labeling import LabelJob, read_picks; from pathlib import Path; "
        f"job = LabelJob(read_picks(Path({str(picks)!r})), ['negative', 'positive'], Path({str(log)!r})); "
        "print('ready', flush=True); time.sleep(60)")], stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
    return holder


def test_two_label_servers_on_one_file_are_refused(tmp_path):
    # Both started, both handed out the first text, both appended: the later answer silently won.
    picks, _ = picks_file(tmp_path / "picks.jsonl", n=6)
    log = tmp_path / "labels.jsonl"
    holder = _holding(picks, log)
    try:
        with pytest.raises(DataError, match="another senti label is writing to this file"):
            LabelJob(read_picks(picks), ["negative", "positive"], log)
    finally:
        holder.kill()
        holder.wait()
    LabelJob(read_picks(picks), ["negative", "positive"], log)  # free again once the other is gone


def test_a_labels_file_behind_a_link_is_locked_as_the_file_itself(tmp_path):
    # The lock was named for the path given: a symbolic link to a labels file started a second server on it, and a
    # hard link too.
    import os

    picks, _ = picks_file(tmp_path / "picks.jsonl", n=6)
    log = tmp_path / "labels.jsonl"
    log.write_text("", encoding="utf-8")
    holder = _holding(picks, log)
    try:
        (tmp_path / "elsewhere").mkdir()
        link = tmp_path / "elsewhere" / "mine.jsonl"
        link.symlink_to(log)
        with pytest.raises(DataError, match="another senti label is writing to this file"):
            LabelJob(read_picks(picks), ["negative", "positive"], link)
        hard = tmp_path / "elsewhere" / "hard.jsonl"
        os.link(log, hard)
        with pytest.raises(DataError, match="has 2 hard links; give a file with one name"):
            LabelJob(read_picks(picks), ["negative", "positive"], hard)
    finally:
        holder.kill()
        holder.wait()


def test_resume_is_linear_in_the_log_and_a_bad_byte_is_one_line(tmp_path):
    # 40,000 lines took 32 s to resume (a list searched and cut per line); 400,000 never started serving.
    n = 20_000
    picks = tmp_path / "picks.jsonl"
    picks.write_text("".join(json.dumps({"id": f"r{i}", "text": f"评论{i}"}, ensure_ascii=False) + "\n"
                             for i in range(n)), encoding="utf-8")
    log = tmp_path / "labels.jsonl"
    with log.open("w", encoding="utf-8") as fh:
        for label in ("positive", "negative"):  # every text labelled, then every label changed: 40,000 lines
            for i in range(n):
                fh.write(json.dumps({"id": f"r{i}", "text": f"评论{i}", "label": label, "answer": "label"},
                                    ensure_ascii=False) + "\n")
    started = time.perf_counter()
    job = LabelJob(read_picks(picks), ["negative", "positive"], log)
    assert time.perf_counter() - started < 5 and job.done() == n and job.next_for("t") is None
    assert job.recent(2) == [{"id": f"r{n - 1}", "text": f"评论{n - 1}", "label": "negative", "answer": "label"},
                             {"id": f"r{n - 2}", "text": f"评论{n - 2}", "label": "negative", "answer": "label"}]
    with log.open("ab") as fh:
        fh.write(b'{"id": "r1", "text": "\xff", "label": "positive", "answer": "label"}\n')
    with pytest.raises(DataError, match=f"{log}:{2 * n + 1}: not valid UTF-8"):
        LabelJob(read_picks(picks), ["negative", "positive"], log)


def test_the_label_server_answers_only_its_loopback_names(tmp_path, label_server):
    # Host: attacker.example read /api/job (every text) on a server with no key: DNS rebinding's way in.
    picks, _ = picks_file(tmp_path / "picks.jsonl", n=4)
    base, _ = label_server(picks, tmp_path / "labels.jsonl")
    headers = {"X-API-Key": KEY}
    assert httpx.get(f"{base}/api/job", headers={**headers, "Host": "attacker.example"}).status_code == 421
    assert httpx.post(f"{base}/api/next", json={"tab": "t"},
                      headers={**headers, "Host": "attacker.example"}).status_code == 421
    assert httpx.get(f"{base}/api/job", headers=headers).status_code == 200
    page = httpx.get(f"{base}/", headers=headers)
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]  # its buttons cannot be framed
    assert_only_own_scripts(page)


def test_the_readmes_label_command_takes_the_label_names_from_the_picks(tmp_path, _exported):
    """`senti label --input picks.jsonl --output labels.jsonl`, as the README says it, failed ("say the label
    names"): the picks of senti select now carry them."""
    from senti.toolkit.surge.labeling import open_job
    from senti.toolkit.surge.selection import Selection, select_file

    pool = write_rows(tmp_path / "pool.tsv", [(str(i), t) for i, (_, t) in enumerate(synthetic_rows(30, seed=9))],
                      header=("id", "text"))
    select_file(_exported[0], pool, tmp_path / "picks.jsonl", Selection(4))
    job = open_job(tmp_path / "picks.jsonl", tmp_path / "labels.jsonl")
    assert job.labels == ["negative", "positive"]
    mixed = tmp_path / "mixed.jsonl"  # picks that disagree on the label set say nothing: the user is asked
    lines = (tmp_path / "picks.jsonl").read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[0])
    record["labels"] = ["a", "b"]
    mixed.write_text("\n".join([json.dumps(record, ensure_ascii=False), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match="say the label names"):
        open_job(mixed, tmp_path / "labels2.jsonl")


def test_the_unsure_queue_of_senti_predict_opens_in_the_label_page(tmp_path, browser, label_server, _exported):
    """`senti predict --unsure-output` writes the texts below the export's abstention threshold with the model's
    guess; the label page opens that file as it opens picks, shows the guess, and logs the answer by the row's id."""
    import sys

    from senti.serving import Predictor

    out, _ = _exported
    rows = synthetic_rows(120, seed=43)
    src = tmp_path / "surge.jsonl"
    src.write_text("".join(json.dumps({"id": f"s{i}", "text": t}, ensure_ascii=False) + "\n"
                           for i, (_, t) in enumerate(rows)), encoding="utf-8")
    queue = tmp_path / "queue.jsonl"
    done = subprocess.run([sys.executable, "-m", "senti.cli", "predict", "--model", str(out), "--input", str(src),
                           "--output", str(tmp_path / "scored.jsonl"), "--unsure-output", str(queue)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    answers = Predictor.load(out).predict([t for _, t in rows])
    unsure = [(f"s{i}", a) for i, a in enumerate(answers) if a.unsure]
    assert unsure and len(unsure) < len(rows)
    log = tmp_path / "labels.jsonl"
    base, _ = label_server(queue, log)
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {
        "Authorization": "Basic " + base64.b64encode(f"me:{KEY}".encode()).decode()}})
    browser.get(f"{base}/")
    wait = WebDriverWait(browser, 30)
    wait.until(lambda d: d.find_element(By.ID, "progress").text == f"0 / {len(unsure)}")
    first_id, first = unsure[0]
    assert browser.find_element(By.ID, "text").text == rows[int(first_id[1:])][1]
    assert browser.find_element(By.ID, "guess-label").text == first.label
    browser.find_element(By.TAG_NAME, "body").send_keys("a")  # the guess accepted
    wait.until(lambda d: d.find_element(By.ID, "progress").text == f"1 / {len(unsure)}")
    assert [(r["id"], r["answer"], r["label"]) for r in log_lines(log)] == [(first_id, "accept", first.label)]
