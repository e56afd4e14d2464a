"""`senti serve`'s pages in a real browser with the network cut to loopback: `/docs` renders Swagger UI from
assets served by senti, and `/` scores texts and draws the drift charts; both behind the API key."""

from __future__ import annotations

import base64
import re

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from senti.serving import Predictor
from tests.helpers import KEY, PARITY, requested_urls, running_server

BASIC = {"Authorization": "Basic " + base64.b64encode(f"anyone:{KEY}".encode()).decode()}
EXTERNAL_URL = re.compile(r"(?:https?:)?//(?!127\.0\.0\.1[:/])[\w.-]+", re.I)


@pytest.fixture(scope="module")
def server(_exported):
    out, _ = _exported
    with running_server(out) as (base, _proc):
        yield base


def test_pages_answer_with_no_external_url_and_the_console_is_behind_the_key(server):
    docs = httpx.get(f"{server}/docs")
    assert docs.status_code == 200 and "/docs/assets/swagger-ui-bundle.js" in docs.text
    assert not EXTERNAL_URL.search(docs.text), EXTERNAL_URL.search(docs.text)
    for asset in ("swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"):
        assert httpx.get(f"{server}/docs/assets/{asset}").status_code == 200
    assert httpx.get(f"{server}/docs/assets/..%2F__init__.py").status_code == 404
    assert httpx.get(f"{server}/docs/assets/index.html").status_code == 404  # a fixed list, not the folder

    refused = httpx.get(f"{server}/")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")
    assert httpx.get(f"{server}/v1/status").status_code == 401
    page = httpx.get(f"{server}/", headers=BASIC)
    assert page.status_code == 200 and not EXTERNAL_URL.search(page.text)
    assert "default-src 'self'" in page.headers["content-security-policy"]
    # The key in any accepted form: X-API-Key, Bearer in any case, Basic with any user name.
    for headers in ({"X-API-Key": KEY}, {"Authorization": f"bearer {KEY}"}, {"Authorization": f"BEARER {KEY}"}, BASIC):
        assert httpx.get(f"{server}/v1/status", headers=headers).status_code == 200, headers
    wrong = {"Authorization": "Basic " + base64.b64encode(b"anyone:wrong").decode()}
    assert httpx.get(f"{server}/v1/status", headers=wrong).status_code == 401
    assert httpx.get(f"{server}/v1/status", headers={"Authorization": "Basic %%%"}).status_code == 401


def test_docs_and_console_render_in_a_browser_offline(server, browser, _exported):
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": BASIC})
    wait = WebDriverWait(browser, 30)

    browser.get(f"{server}/docs")  # rendered: Swagger UI built the operation list from /openapi.json
    paths = wait.until(lambda d: [e.text for e in d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")] or None)
    assert paths and "/v1/predict" in paths and "/v1/status" in paths
    assert "senti" in browser.find_element(By.CSS_SELECTOR, ".info .title").text

    browser.get(f"{server}/")
    wait.until(lambda d: d.find_element(By.ID, "model").text.startswith("model "))
    hostile = '<img src=x onerror="document.title=\'owned\'">差评'
    texts = [PARITY[0][1], PARITY[1][1], hostile]
    box = browser.find_element(By.ID, "texts")
    box.clear()
    box.send_keys("\n".join(texts))
    browser.find_element(By.ID, "score").click()
    rows = wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "tr.prediction") or None)
    expected = Predictor.load(_exported[0], backend="onnx").predict(texts)
    assert [r.find_element(By.CSS_SELECTOR, ".label").text for r in rows] == [p.label for p in expected]
    assert rows[2].find_element(By.CSS_SELECTOR, ".text").text == hostile  # shown as text, never run
    assert browser.title == "senti" and not browser.find_elements(By.CSS_SELECTOR, "#results img")
    assert len(rows[0].find_elements(By.CSS_SELECTOR, ".bar i")) == 2  # a confidence bar per label

    # The charts: bars for the texts just scored beside the dev reference recorded at export.
    wait.until(lambda d: d.find_element(By.ID, "scored").text == "3")
    here = browser.find_elements(By.CSS_SELECTOR, "#chart-confidence rect[fill='#3b6fd8']")
    dev = browser.find_elements(By.CSS_SELECTOR, "#chart-confidence rect[fill='#b9c2d0']")
    assert len(here) == len(dev) == 8
    assert sum(float(r.get_attribute("data-share")) for r in here) == pytest.approx(1.0, abs=1e-3)
    assert browser.find_element(By.ID, "chart-labels").size["height"] > 100

    outside = [u for u in requested_urls(browser) if not u.startswith(f"{server}/") and not u.startswith("data:")]
    assert outside == []
    assert not [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
