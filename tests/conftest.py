"""Shared fixtures: synthetic review corpora, real ChnSentiCorp when present, one tiny trained checkpoint."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from senti.core.runtime import configure_runtime

configure_runtime()  # threads and MKL's AMD path must be set before any test imports paddle

ROOT = Path(__file__).resolve().parent.parent
CHNSENTICORP = ROOT.parent / "shared" / "data" / "chnsenticorp"

# Cue words per class: a tiny model learns these in a few dozen steps.
CUES = {
    "positive": ["非常好", "很满意", "推荐购买", "质量不错", "喜欢", "物超所值"],
    "negative": ["太差了", "很失望", "不推荐", "质量垃圾", "讨厌", "退货了"],
}
EMOTIONS = {
    "joy": ["开心", "高兴"], "anger": ["愤怒", "气死"], "sadness": ["难过", "伤心"],
    "fear": ["害怕", "恐惧"], "surprise": ["惊讶", "意外"], "disgust": ["恶心", "反感"],
}
FILLER = list("这个东西我们昨天买的店家快递包装外观颜色价格服务酒店房间电脑屏幕书本内容")


def synthetic_rows(n: int, classes: dict[str, list[str]] = CUES, seed: int = 0) -> list[tuple[str, str]]:
    """(label, text) rows: filler characters around one cue word of the label's class."""
    rng = random.Random(seed)
    labels = sorted(classes)
    rows = []
    for i in range(n):
        label = labels[i % len(labels)]
        left = "".join(rng.choices(FILLER, k=rng.randint(2, 12)))
        right = "".join(rng.choices(FILLER, k=rng.randint(2, 12)))
        rows.append((label, f"{left}{rng.choice(classes[label])}{right}"))
    rng.shuffle(rows)
    return rows


def write_rows(path: Path, rows, header=("label", "text_a")) -> Path:
    """Write (label, text) rows as .tsv, .csv or .jsonl by the file's suffix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".jsonl":
        with path.open("w", encoding="utf-8") as fh:
            for label, text in rows:
                fh.write(json.dumps({header[0]: label, header[1]: text}, ensure_ascii=False) + "\n")
    elif path.suffix == ".csv":
        with path.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(header)
            writer.writerows(rows)
    else:
        lines = ["\t".join(header)] + [f"{label}\t{text}" for label, text in rows]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_folder(folder: Path, train, dev, test=None, suffix=".tsv") -> Path:
    write_rows(folder / f"train{suffix}", train)
    write_rows(folder / f"dev{suffix}", dev)
    if test is not None:
        write_rows(folder / f"test{suffix}", test)
    return folder


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


def train_tiny(output_dir: Path, dataset: Path, **overrides):
    from senti.toolkit.config import TrainConfig
    from senti.toolkit.train import run_training

    settings: dict[str, Any] = dict(model="scratch:tiny", dataset=str(dataset), output_dir=str(output_dir), epochs=2,
                    batch_size=16, lr=1e-3, device="cpu", seed=7)
    settings.update(overrides)
    return run_training(TrainConfig(**settings), say=lambda _: None)


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


PARITY = synthetic_rows(220, seed=11)  # real-looking texts with gold labels for export parity checks


def export_tiny(checkpoint: Path, out: Path, **options):
    from senti.export.pipeline import ExportConfig, export_model

    config = ExportConfig(model=str(checkpoint), output_dir=str(out), **options)
    return export_model(config, [t for _, t in PARITY], [label for label, _ in PARITY], say=lambda _: None)


@pytest.fixture(scope="session")
def _exported(_trained_checkpoint, tmp_path_factory):
    """(export folder, export.json) of the session's tiny model, every format; read-only by convention."""
    out = tmp_path_factory.mktemp("export") / "tiny"
    record = export_tiny(_trained_checkpoint / "checkpoint", out, quantize="int8", fp16=True)
    return out, record


# A real `senti serve` on 127.0.0.1 (the API key comes through --api-key-env).
KEY = "test-key-123"
AUTH = {"X-API-Key": KEY}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_server(export_dir: Path, *extra: str):
    workers = [] if "--workers" in extra else ["--workers", "1"]  # the same on any number of cores
    proc, base = start_senti("serve", "--model", str(export_dir), "--backend", "onnx", "--threads", "2", *workers,
                             *extra)
    try:
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()




def start_senti(command: str, *args: str, port: int | None = None, ready: str = "/readyz"):
    """(process, base URL) of a senti command serving on 127.0.0.1 (the key through --api-key-env), once `ready`
    answers 200; the process's output is the error when it exits first."""
    port = port or _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SENTI_TEST_KEY": KEY}
    proc = subprocess.Popen([sys.executable, "-m", "senti.cli", command, *args, "--port", str(port),
                             "--api-key-env", "SENTI_TEST_KEY"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(proc.stdout.read())
        try:
            if httpx.get(f"{base}{ready}", headers=AUTH, timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"senti {command} did not become ready in 60 s")


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


def requested_urls(driver) -> list[str]:
    """The URLs the browser asked for since the last call (from Chrome's performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


# Texts that stress a tokenizer: empty, whitespace, Traditional, mixed scripts, emoji, full width, control
# characters, special-token names, long.
EDGE_CASES = [
    "", "   ", "\t\n ", "這家飯店的服務態度很差勁，環境還可以。", "iPhone 15 Pro Max 256GB 价格6999元 OK!",
    "好评👍😀🎉 绝了", "（）！？，。：；“”‘’【】《》～￥×", "ＡＢＣ１２３ｆｕｌｌ　ｗｉｄｔｈ", "Café naïve résumé ÀÉÎ",
    "a\u200bb\u00adc\x00\ufffd", "[UNK] [CLS] 好 [SEP]", "x" * 150, "很好" * 5000, "e\u0301 µ² º 〇 Ø",
]
