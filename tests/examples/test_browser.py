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

from tests.helpers import PARITY, free_port, requested_urls

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
    shutil.copy(EXAMPLES / "node" / "scorer.mjs", root / "node" / "scorer.mjs")
    done = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=page, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    shutil.copytree(_exported[0], page / "model", ignore=shutil.ignore_patterns("paddle", "triton", "*.int8*"))
    return root


def test_the_page_scores_in_the_browser_as_senti_serving_does(site, _exported, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from senti.serving import Predictor

    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "--directory", str(site),
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        WebDriverWait(browser, 30, ignored_exceptions=(httpx.TransportError,)).until(
            lambda _: httpx.get(f"{base}/browser/").status_code == 200)
        browser.get(f"{base}/browser/")
        status = browser.find_element(By.ID, "status")
        WebDriverWait(browser, 120).until(lambda _: status.text != "loading the model…")
        assert status.text.startswith("model loaded"), status.text
        box = browser.find_element(By.ID, "text")
        box.clear()
        box.send_keys("服务态度极差，再也不买了")
        browser.find_element(By.ID, "score").click()
        WebDriverWait(browser, 30).until(lambda d: d.find_element(By.ID, "label").text != "-")
        python = Predictor.load(_exported[0], backend="onnx")
        assert browser.find_element(By.ID, "label").text == python.predict(["服务态度极差，再也不买了"])[0].label
        assert len(browser.find_elements(By.CSS_SELECTOR, "#probabilities tr")) == len(python.labels)
        # the export's parity sample and more, scored in the page: the labels senti.serving gives
        meta = json.loads((_exported[0] / "export.json").read_text(encoding="utf-8"))
        texts = meta["parity_sample"]["texts"] + [t for _, t in PARITY[:60]]
        page = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "window.senti.predict(arguments[0]).then((p) => done(p.map((x) => x.label)), (e) => done(String(e)));",
            texts)
        assert page == [p.label for p in python.predict(texts)]
        outside = [u for u in requested_urls(browser) if not u.startswith(base) and not u.startswith("data:")]
        assert outside == []  # nothing from a CDN or anywhere else
    finally:
        server.terminate()
        server.wait()
