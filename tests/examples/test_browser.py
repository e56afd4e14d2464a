"""examples/browser: the export scored in headless Chromium (onnxruntime-web, WebAssembly), served by a static file
server on 127.0.0.1, with the same labels as senti.serving and nothing requested beyond 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.helpers import PARITY, free_port, requested_urls, synthetic_aspect_rows, train_aspect_heads

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

if not shutil.which("npm"):
    pytest.skip("npm is not installed: the browser example's dependencies cannot be installed", allow_module_level=True)


@pytest.fixture(scope="module")
def site(tmp_path_factory, _exported) -> Path:
    """examples/ as a static site: the page with its locked dependencies installed, the shared scorer, the export."""
    root = tmp_path_factory.mktemp("site")
    page = root / "browser"
    page.mkdir()
    for name in ("index.html", "app.mjs", "page.css", "package.json", "package-lock.json"):
        shutil.copy(EXAMPLES / "browser" / name, page / name)
    (root / "node").mkdir()
    for name in ("scorer.mjs", "aspects.mjs"):
        shutil.copy(EXAMPLES / "node" / name, root / "node" / name)
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=page, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.copytree(_exported[0], page / "model", ignore=shutil.ignore_patterns("paddle", "triton", "*.int8*"))
    return root


class StaticSite:
    """`python -m http.server` over the site on 127.0.0.1, and the page at `query` opened in the browser until its
    model is loaded (or it says why not)."""

    def __init__(self, root: Path):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory",
                                        str(root), str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def open(self, browser, query: str = "") -> str:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(browser, 30, ignored_exceptions=(httpx.TransportError,)).until(
            lambda _: httpx.get(f"{self.base}/browser/").status_code == 200)
        browser.get(f"{self.base}/browser/{query}")
        status = browser.find_element(By.ID, "status")
        WebDriverWait(browser, 120).until(lambda _: status.text != "loading the model…")
        return status.text

    def close(self) -> None:
        self.server.terminate()
        self.server.wait()


def test_the_page_scores_in_the_browser_as_senti_serving_does(site, _exported, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from senti.serving import Predictor

    static = StaticSite(site)
    try:
        base = static.base
        status = static.open(browser)
        assert status.startswith("model loaded"), status
        box = browser.find_element(By.ID, "text")
        box.clear()
        box.send_keys("服务态度极差，再也不买了")
        browser.find_element(By.ID, "score").click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "label").text != "-")
        python = Predictor.load(_exported[0], backend="onnx")
        said = python.predict(["服务态度极差，再也不买了"])[0]
        assert browser.find_element(By.ID, "label").text == said.label + (" (unsure)" if said.unsure else "")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#probabilities tr")) == len(python.labels)
        assert "calibrated, temperature" in status and "unsure below" in status  # the export's scores, stated
        # the export's parity sample and more, scored in the page: senti.serving's labels, calibrated
        # probabilities (within 1e-6) and unsure flags
        meta = json.loads((_exported[0] / "export.json").read_text(encoding="utf-8"))
        texts = meta["parity_sample"]["texts"] + [t for _, t in PARITY[:60]]
        page = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "window.senti.predict(arguments[0]).then((p) => done(p.map((x) => [x.label, x.probabilities, x.unsure])),"
            " (e) => done(String(e)));", texts)
        answers = python.predict(texts)
        assert [p[0] for p in page] == [a.label for a in answers]
        assert [p[2] for p in page] == [a.unsure for a in answers] and any(a.unsure for a in answers)
        assert max(abs(p[1][lab] - a.probabilities[lab]) for p, a in zip(page, answers) for lab in python.labels) \
            < 1e-6
        outside = [u for u in requested_urls(browser) if not u.startswith(base) and not u.startswith("data:")]
        assert outside == []  # nothing from a CDN or anywhere else
    finally:
        static.close()


def test_the_page_answers_per_aspect_from_an_aspect_heads_export(site, browser, tmp_path):
    """An export with aspect heads: the page answers each aspect as senti.serving does (the heads' own names, no
    keywords, so no evidence); before, it showed the 72 outputs as one text's labels."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from senti.core.aspects import Aspect
    from senti.serving import Predictor

    _, _, export, _ = train_aspect_heads(tmp_path)
    shutil.copytree(export, site / "browser" / "heads", ignore=shutil.ignore_patterns("paddle"))
    static = StaticSite(site)
    try:
        status = static.open(browser, "?model=heads/")
        python = Predictor.load(export, backend="onnx")
        names = [label.rsplit("/", 1)[0] for label in python.labels[::4]]
        assert status.startswith("model loaded") and status.endswith(f"; {len(names)} aspect heads"), status
        text = "服务很热情，味道难吃死。"
        box = browser.find_element(By.ID, "text")
        box.clear()
        box.send_keys(text)
        browser.find_element(By.ID, "score").click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "label").text != "-")
        heads = [Aspect(name=name, keywords=("-",)) for name in names]  # keywords give evidence only
        texts = [text] + [r["text"] for r in synthetic_aspect_rows(30, seed=9)]
        want = [{name: a.polarity for name, a in row.items()} for row in python.aspects(texts, heads)]
        shown = {row.find_elements(By.TAG_NAME, "td")[0].text: row.find_elements(By.TAG_NAME, "td")[1].text
                 for row in browser.find_elements(By.CSS_SELECTOR, "#probabilities tr")}
        assert shown == want[0]
        assert browser.find_element(By.ID, "label").text.endswith(f"of {len(names)} aspects mentioned")
        page = browser.execute_async_script(
            "const [texts, names] = arguments, done = arguments[arguments.length - 1];"
            "import('../node/aspects.mjs').then((m) => m.answerAspects(window.senti, texts,"
            "  names.map((name) => ({name, label: '', keywords: []}))))"
            ".then((rows) => done(rows.map((r) => Object.fromEntries(Object.entries(r).map(([k, a]) => [k, a.polarity])))),"
            "  (e) => done(String(e)));",
            texts, names)
        assert page == want
    finally:
        static.close()
