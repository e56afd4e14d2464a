"""The README's tour and the guides' commands, tested: every `senti ...` line they show names a real command and real
options, and the tour runs end to end on tiny data, printing the lines the README shows."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.helpers import AUTH, start_senti, synthetic_rows, write_folder, write_rows

ROOT = Path(__file__).resolve().parents[2]
SENTI = [sys.executable, "-m", "senti.cli"]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs" / "guides").glob("*.md"))]


def _senti_lines(page: Path) -> list[tuple[int, list[str]]]:
    """(line number, words) of each `senti ...` command in the page's code blocks, continuations joined, chains
    split; `[--option]` brackets (optional parts) opened."""
    commands, block, pending, start = [], None, "", 0
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            block = None if block is not None else line.strip().strip("`")
            continue
        if block not in ("bash", "sh", ""):  # shell blocks only (not Python, not printed output)
            continue
        if not pending:
            start = n
        pending += line.rstrip("\\") + " "
        if line.endswith("\\"):
            continue
        for part in re.split(r" (?:&&|\||;) ", pending.split(" # ")[0]):
            if not part.strip().startswith("senti "):
                continue
            words = shlex.split(part.replace("[", " ").replace("]", " "), comments=True)
            commands.append((start, words[1:]))
        pending = ""
    return commands


def test_every_senti_command_in_the_readme_and_guides_names_real_options():
    import typer

    from senti.cli import app

    root: Any = typer.main.get_command(app)  # a group: its commands by name
    checked = 0
    for page in PAGES:
        for n, words in _senti_lines(page):
            where = f"{page.relative_to(ROOT)}:{n}"
            cmd = root.commands.get(words[0])
            assert cmd is not None, f"{where}: no command senti {words[0]}"
            rest = words[1:]
            if hasattr(cmd, "commands") and rest and rest[0] in cmd.commands:  # a group: senti bench compare
                cmd, rest = cmd.commands[rest[0]], rest[1:]
            names = {o for p in cmd.params for o in (*getattr(p, "opts", ()), *getattr(p, "secondary_opts", ()))}
            for word in rest:
                option = word.split("=")[0]
                if option.startswith("--"):
                    assert option in names, f"{where}: senti {words[0]} has no option {option}"
            checked += 1
    assert checked >= 20  # the tour and the guides' blocks were found


@pytest.mark.slow
def test_the_readme_tour_runs_on_tiny_data(tmp_path):
    def senti(*args: str) -> str:
        done = subprocess.run([*SENTI, *args], capture_output=True, text=True, timeout=600, cwd=tmp_path,
                              env={"COLUMNS": "200", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        return done.stdout + done.stderr

    data = write_folder(tmp_path / "chnsenticorp", synthetic_rows(300, seed=1), synthetic_rows(60, seed=2),
                        synthetic_rows(60, seed=3))
    out = senti("train", "--model", "scratch:tiny", "--dataset", str(data), "--output-dir", "runs/tiny",
                "--epochs", "2")
    assert "baseline (char 1-3-gram TF-IDF" in out and "best checkpoint: runs/tiny (dev accuracy" in out
    out = senti("eval", "--model", "runs/tiny", "--split", "test")
    assert "accuracy" in out and "model - baseline:" in out
    shop = [write_folder(tmp_path / "shop" / name, synthetic_rows(60, seed=s), synthetic_rows(20, seed=s + 1),
                         synthetic_rows(30, seed=s + 2)) for name, s in (("fruit", 10), ("shampoo", 20))]
    out = senti("eval", "--model", "runs/tiny", "--dataset", str(shop[0]), "--dataset", str(shop[1]))
    assert "test split per domain" in out and "fruit" in out and "shampoo" in out
    senti("export", "--model", "runs/tiny", "--output-dir", "runs/tiny-export", "--quantize", "int8")
    out = senti("predict", "--model", "runs/tiny-export", "这个产品非常好用，物流也很快", "服务态度极差，再也不买了")
    assert "positive" in out or "negative" in out
    surge = write_rows(tmp_path / "surge.jsonl", synthetic_rows(80, seed=40), header=("label", "text"))
    senti("select", "--model", "runs/tiny-export", "--input", str(surge), "--budget", "40", "--output", "picks.jsonl")
    picks = [json.loads(line) for line in (tmp_path / "picks.jsonl").read_text(encoding="utf-8").splitlines()]
    gold = {t: lab for lab, t in synthetic_rows(80, seed=40)}
    write_rows(tmp_path / "labels.tsv", [(gold[p["text"]], p["text"]) for p in picks])  # what the page collects
    out = senti("train", "--model", "runs/tiny", "--dataset", "labels.tsv", "--replay", str(data), "--output-dir",
                "runs/tiny-2")
    assert "replayed from" in out and "best checkpoint: runs/tiny-2" in out

    server, base = start_senti("serve", "--model", str(tmp_path / "runs" / "tiny-export"))
    try:
        answer = httpx.post(f"{base}/v1/predict", json={"texts": ["物流很快，质量不错"]}, headers=AUTH, timeout=30)
        assert answer.status_code == 200 and answer.json()["predictions"][0]["label"] in ("negative", "positive")
    finally:
        server.terminate()
        server.wait(60)


def test_the_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    # no lab notebook: no private run folders, sessions, rounds or issue numbers
    assert not re.search(r"runs/s\d|[Ss]ession \d|[Rr]ound \d|[Ii]ssue \d", text)
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text):  # every relative link resolves
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README.md links to {target}, which does not exist"


def test_the_docs_hold_no_lab_notebook():
    for page in (ROOT / "docs").rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        found = re.findall(r"runs/s\d+|[Ss]ession \d+|[Rr]ound \d+|[Ii]ssue \d+", text)
        assert not found, f"{page.relative_to(ROOT)}: {found}"
