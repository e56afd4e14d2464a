"""The README's screenshots of senti's pages, taken in headless Chromium (Debian's chromium, chromedriver).

    python -m experiments.page_screenshots --model EXPORT --pool TEXTS [--output-dir docs/img]
    python -m experiments.page_screenshots --model EXPORT --pool REVIEWS --aspects ASPECTS.json

Starts `senti serve --model EXPORT` on loopback, scores a few texts on `/` and shoots it and `/docs`; picks 40
texts of TEXTS with `senti select`, starts `senti label` on them, answers three by keys and shoots the page. With
--aspects, only the label page's aspect mode instead: 20 picks of `senti select --aspects`, two texts answered by
keys and the first aspect of the third, shot as label-aspects.png.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

SAMPLE = ["这个产品非常好用，物流也很快", "服务态度极差，再也不买了", "房间还行，就是隔音不太好，早餐一般",
          "<b>标签</b> 也只是文字"]


def _browser():
    import shutil

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for flag in ("--headless=new", "--no-sandbox", "--window-size=1200,900", "--force-device-scale-factor=1",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))


def _progress_reads(n: int):
    """A wait condition: the label page's progress line starts with `n /`."""
    from selenium.webdriver.common.by import By

    return lambda d: d.find_element(By.ID, "progress").text.startswith(f"{n} /")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, type=Path)
    parser.add_argument("--pool", required=True, type=Path)
    parser.add_argument("--output-dir", type=Path, default=Path("docs/img"))
    parser.add_argument("--aspects", type=Path, default=None)
    args = parser.parse_args()
    if args.aspects is not None:
        _aspect_page(args)
        return
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from senti.benchmarks.local_server import start_senti

    args.output_dir.mkdir(parents=True, exist_ok=True)
    driver = _browser()
    wait = WebDriverWait(driver, 60)
    serve, base = start_senti(["serve", "--model", str(args.model)])
    try:
        driver.get(f"{base}/")
        box = wait.until(lambda d: d.find_element(By.ID, "texts"))
        box.clear()
        box.send_keys("\n".join(SAMPLE))
        driver.find_element(By.ID, "score").click()
        wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "tr.prediction")) == len(SAMPLE))
        wait.until(lambda d: d.find_element(By.ID, "scored").text == str(len(SAMPLE)))
        driver.save_screenshot(str(args.output_dir / "serve-console.png"))
        driver.get(f"{base}/docs")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, ".opblock-summary-path"))
        driver.save_screenshot(str(args.output_dir / "serve-docs.png"))
    finally:
        serve.terminate()
        serve.wait()
    with tempfile.TemporaryDirectory() as tmp:
        picks, labels = Path(tmp) / "picks.jsonl", Path(tmp) / "labels.jsonl"
        subprocess.run([sys.executable, "-m", "senti.cli", "select", "--model", str(args.model), "--input",
                        str(args.pool), "--output", str(picks), "--budget", "40"], check=True)
        label, base = start_senti(["label", "--input", str(picks), "--output", str(labels), "--model",
                                   str(args.model)], ready="/api/job")
        try:
            driver.get(f"{base}/")
            for n, key in enumerate("2a1"):
                wait.until(_progress_reads(n))
                driver.find_element(By.TAG_NAME, "body").send_keys(key)
            wait.until(lambda d: d.find_element(By.ID, "progress").text.startswith("3 /"))
            driver.save_screenshot(str(args.output_dir / "label.png"))
        finally:
            label.terminate()
            label.wait()
    driver.quit()
    print(f"screenshots in {args.output_dir}: serve-console.png, serve-docs.png, label.png")


def _aspect_page(args) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from senti.benchmarks.local_server import start_senti

    args.output_dir.mkdir(parents=True, exist_ok=True)
    driver = _browser()
    wait = WebDriverWait(driver, 60)
    with tempfile.TemporaryDirectory() as tmp:
        picks, labels = Path(tmp) / "picks.jsonl", Path(tmp) / "labels.jsonl"
        subprocess.run([sys.executable, "-m", "senti.cli", "select", "--model", str(args.model), "--input",
                        str(args.pool), "--output", str(picks), "--budget", "20", "--aspects", str(args.aspects)],
                       check=True)
        label, base = start_senti(["label", "--input", str(picks), "--output", str(labels), "--aspects",
                                   str(args.aspects)], ready="/api/job")
        try:
            driver.get(f"{base}/")
            for n in range(2):
                wait.until(_progress_reads(n))
                wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#aspects tr[data-aspect]"))
                for _ in driver.find_elements(By.CSS_SELECTOR, "#aspects tr[data-aspect]"):
                    driver.find_element(By.TAG_NAME, "body").send_keys("1")
            wait.until(_progress_reads(2))
            wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#aspects tr[data-aspect]"))
            driver.find_element(By.TAG_NAME, "body").send_keys("3")
            driver.save_screenshot(str(args.output_dir / "label-aspects.png"))
        finally:
            label.terminate()
            label.wait()
    driver.quit()
    print(f"screenshot in {args.output_dir}: label-aspects.png")


if __name__ == "__main__":
    main()
