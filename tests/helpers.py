"""Helpers the tests import: synthetic review corpora, a tiny model trained and exported, a real `senti serve` on
127.0.0.1, and texts that stress a tokenizer. Plain functions and constants; the fixtures are in conftest.py."""

from __future__ import annotations

import csv
import json
import os
import random
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from senti.benchmarks import local_server

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


def train_tiny(output_dir: Path, dataset: Path, **overrides):
    from senti.toolkit.training.config import TrainConfig
    from senti.toolkit.training.train import run_training

    settings: dict[str, Any] = dict(model="scratch:tiny", dataset=str(dataset), output_dir=str(output_dir), epochs=2,
                    batch_size=16, lr=1e-3, device="cpu", seed=7)
    settings.update(overrides)
    return run_training(TrainConfig(**settings), say=lambda _: None)


PARITY = synthetic_rows(220, seed=11)  # real-looking texts with gold labels for export parity checks


def export_tiny(checkpoint: Path, out: Path, **options):
    from senti.export.pipeline import ExportConfig, export_model

    config = ExportConfig(model=str(checkpoint), output_dir=str(out), **options)
    return export_model(config, [t for _, t in PARITY], [label for label, _ in PARITY], say=lambda _: None)


# A real `senti serve` on 127.0.0.1 (the API key comes through --api-key-env).
KEY = "test-key-123"
AUTH = {"X-API-Key": KEY}


free_port = local_server.free_port


@contextmanager
def running_server(export_dir: Path, *extra: str):
    workers = [] if "--workers" in extra else ["--workers", "1"]  # the same on any number of cores
    proc, base = start_senti("serve", "--model", str(export_dir), "--backend", "onnx", "--threads", "2", *workers,
                             *extra)
    count = int(extra[extra.index("--workers") + 1]) if workers == [] else 1
    deadline = time.monotonic() + 60  # /readyz answered by one worker; the others may still be loading
    while count > 1 and _in_service(base) < count:
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            raise AssertionError(f"{count} workers were not in service in 60 s:\n{output_of(proc)}")
        time.sleep(0.2)
    try:
        yield base, proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def output_of(proc: subprocess.Popen) -> str:
    """All a process started by `start_senti` has written so far (stdout and stderr)."""
    return local_server.output_of(proc, last=None)


def _in_service(base: str) -> int:
    """Workers in service as the supervisor of `senti serve --workers N` counts them (0 before it has)."""
    return httpx.get(f"{base}/readyz", headers=AUTH, timeout=10).json().get("workers", {}).get("in_service", 0)


def start_senti(command: str, *args: str, port: int | None = None, ready: str = "/readyz",
                launcher: tuple[str, ...] = (sys.executable, "-m", "senti.cli")):
    """(process, base URL) of a senti command serving on 127.0.0.1 (the key through --api-key-env), once `ready`
    answers 200; the process's output is the error when it exits first, and `output_of(proc)` later.

    The output goes to a file, not a pipe: a pipe nobody reads fills at 64 kB and then blocks every process of the
    server that writes a line (a supervisor logging its workers' failures, for one)."""
    port = port or free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SENTI_TEST_KEY": KEY}
    proc = local_server.launch([*launcher, command, *args, "--port", str(port),
                                "--api-key-env", "SENTI_TEST_KEY"], env=env)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(output_of(proc))
        try:
            if httpx.get(f"{base}{ready}", headers=AUTH, timeout=1).status_code == 200:
                return proc, base
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(f"senti {command} did not become ready in 60 s")


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


def assert_one_reload_shape(record: dict, trigger: str) -> None:
    """A reload record as /readyz and /v1/status show it, from one process or from a supervisor of workers: the
    same keys, an ISO 8601 UTC time."""
    from senti.serving.model_slot import ReloadRecord

    assert set(record) == set(ReloadRecord.__dataclass_fields__), record
    assert record["trigger"] == trigger and datetime.fromisoformat(record["at"]).utcoffset() == timedelta(0), record


def assert_only_own_scripts(page) -> None:
    """script-src names each inline script of the page by its hash: no 'unsafe-inline' (it was there)."""
    import base64
    import hashlib
    import re

    policy = page.headers["content-security-policy"]
    scripts = re.findall(r"<script(?![^>]*\bsrc=)[^>]*>(.*?)</script>", page.text, re.DOTALL)
    script_src = policy.split("script-src", 1)[1].split(";", 1)[0]
    assert scripts and "unsafe-inline" not in script_src, policy
    for body in scripts:
        assert f"'sha256-{base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()}'" in script_src
