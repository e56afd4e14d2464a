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


# Nothing a test starts may listen beyond loopback (the suite's own Ray listened on every interface): a watcher
# samples the listening sockets of this process and its children every 0.2 s and fails the test that was running.
# A test that cannot help it names why with @pytest.mark.listens_beyond_loopback("why").
LOOPBACK = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
_WATCH: dict = {"test": None, "seen": {}}


def _beyond_loopback() -> set[tuple[str, str, int]]:
    import psutil

    me = psutil.Process()
    pids = {me.pid, *(p.pid for p in me.children(recursive=True))}
    found = set()
    for conn in psutil.net_connections(kind="inet"):
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids and conn.laddr.ip not in LOOPBACK:
            try:
                name = psutil.Process(conn.pid).name()
            except psutil.Error:
                name = "?"
            found.add((name, conn.laddr.ip, conn.laddr.port))
    return found


@pytest.fixture(scope="session", autouse=True)
def _listener_watch():
    import threading

    done = threading.Event()

    def watch():  # bounded by the session: stops when it ends
        while not done.wait(0.2):
            test = _WATCH["test"]
            if test is not None:
                found = _beyond_loopback()
                if found:
                    _WATCH["seen"].setdefault(test, set()).update(found)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    yield
    done.set()
    thread.join(5)


@pytest.fixture(autouse=True)
def _no_listener_beyond_loopback(request):
    _WATCH["test"] = request.node.nodeid
    yield
    found = _WATCH["seen"].pop(request.node.nodeid, set()) | _beyond_loopback()
    _WATCH["test"] = None
    allowed = request.node.get_closest_marker("listens_beyond_loopback")
    if found and allowed is None:
        pytest.fail(f"listening beyond loopback during this test: {sorted(found)}", pytrace=False)
