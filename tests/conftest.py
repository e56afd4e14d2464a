"""Shared fixtures: synthetic review corpora, real ChnSentiCorp when present, one tiny trained checkpoint and its
export, a real browser. The helpers they use, and tests import, are in helpers.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from senti.core.runtime import configure_runtime

configure_runtime()  # threads and MKL's AMD path must be set before any test imports paddle

from tests.helpers import CHNSENTICORP, export_tiny, synthetic_rows, train_tiny, write_folder  # noqa: E402


@pytest.fixture
def binary_folder(tmp_path) -> Path:
    """A ChnSentiCorp-layout folder of synthetic binary reviews."""
    return write_folder(tmp_path / "binary", synthetic_rows(600, seed=1), synthetic_rows(120, seed=2),
                        synthetic_rows(120, seed=3))


@pytest.fixture
def chnsenticorp() -> Path:
    if not (CHNSENTICORP / "train.tsv").is_file():
        pytest.skip(f"ChnSentiCorp not found at {CHNSENTICORP}")
    return CHNSENTICORP


@pytest.fixture(scope="session")
def _trained_checkpoint(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tiny")
    data = write_folder(root / "data", synthetic_rows(600, seed=1), synthetic_rows(120, seed=2),
                        synthetic_rows(120, seed=3))
    train_tiny(root / "checkpoint", data)
    return root


@pytest.fixture
def tiny_checkpoint(_trained_checkpoint, tmp_path) -> tuple[Path, Path]:
    """(checkpoint folder, its data folder): a copy per test of a model trained once per session."""
    copy = tmp_path / "trained"
    shutil.copytree(_trained_checkpoint, copy)
    return copy / "checkpoint", copy / "data"


@pytest.fixture(scope="session")
def _exported(_trained_checkpoint, tmp_path_factory):
    """(export folder, export.json) of the session's tiny model, every format, its calibration (fitted on the 120 dev
    texts after training) and an abstention threshold for 80% coverage of the parity texts; read-only by convention."""
    out = tmp_path_factory.mktemp("export") / "tiny"
    record = export_tiny(_trained_checkpoint / "checkpoint", out, quantize="int8", fp16=True, abstain="coverage=0.8")
    return out, record


# A real browser for the pages: Debian's chromium and chromium-driver (.ci/run installs them). Missing, the browser
# tests skip here and fail in CI (SENTI_REQUIRE_BROWSER=1), so CI proves them.
CHROMIUM, CHROMEDRIVER = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")


@pytest.fixture
def browser():
    """Headless Chromium (Selenium) that can reach loopback only: every host name resolves to nothing, and the
    URLs it requested are kept in its performance log for the test to check."""
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("SENTI_REQUIRE_BROWSER"):
            pytest.fail("chromium and chromedriver are required (apt-get install chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver on PATH (apt-get install chromium chromium-driver fonts-noto-cjk)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--no-proxy-server",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
