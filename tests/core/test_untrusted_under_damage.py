"""Every door that reads a file a user hands over, under generated damage (Hypothesis): truncation, bytes that are
not UTF-8, values of the wrong type, huge numbers, deep nesting, links out of the folder. Each read either
succeeds or ends in one line that names the file (a SentiError); never a traceback of another kind, never a read
without bound.

The doors: an export folder's export.json (senti predict, serve, eval, select), a PaddleNLP or checkpoint folder's
config.json (senti train --model), a pretraining corpus, a picks file and a label log (senti label), row files
(.tsv, .csv, .jsonl, .txt) and a dataset folder (senti train, eval, predict)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from senti.core.errors import SentiError
from tests.helpers import synthetic_rows, write_folder, write_rows

SETTINGS = settings(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, database=None)

# JSON values of every kind, huge numbers and long strings among them
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


@st.composite
def damaged_bytes(draw, original: bytes) -> bytes:
    """The file's bytes, damaged one way: cut short, bytes inserted (often not UTF-8), or nested very deep."""
    how = draw(st.sampled_from(["truncate", "insert", "deep", "nul"]))
    if how == "truncate":
        return original[: draw(st.integers(0, max(len(original) - 1, 0)))]
    at = draw(st.integers(0, len(original)))
    if how == "insert":
        return original[:at] + draw(st.binary(min_size=1, max_size=12)) + original[at:]
    if how == "nul":
        return original[:at] + b"\x00" * draw(st.integers(1, 5000)) + original[at:]
    depth = draw(st.integers(50, 100_000))
    return original[:at] + b"[" * depth + b"]" * depth + original[at:]


@st.composite
def damaged_json(draw, original: dict) -> bytes:
    """`original` with one key's value replaced by any JSON value, or a key removed; or its bytes damaged."""
    if draw(st.booleans()):
        return draw(damaged_bytes(json.dumps(original, ensure_ascii=False).encode()))
    data = json.loads(json.dumps(original))
    path, node = [], data
    while isinstance(node, dict) and node and draw(st.booleans()):  # walk into nested records now and then
        key = draw(st.sampled_from(sorted(node)))
        if not isinstance(node[key], dict):
            break
        path.append(key)
        node = node[key]
    if isinstance(node, dict) and node:
        key = draw(st.sampled_from(sorted(node)))
        if draw(st.integers(0, 4)) == 0:
            del node[key]
        else:
            node[key] = draw(VALUES)
    return json.dumps(data, ensure_ascii=False, allow_nan=True).encode()


def one_line_naming(err: SentiError, *names: str) -> None:
    message = str(err)
    assert "\n" not in message and any(name in message for name in names), message


def door(read, path: Path, *names: str) -> None:
    """Read through the door: success, or one SentiError line naming the file."""
    try:
        read(path)
    except SentiError as err:
        one_line_naming(err, *(names or (path.name,)))


# --- an export folder: export.json as every loader reads it ---------------------------------------------------


def test_export_json_under_damage(_exported, tmp_path_factory):
    from senti.serving import Predictor

    source, _ = _exported
    original = json.loads((source / "export.json").read_text(encoding="utf-8"))
    folder = tmp_path_factory.mktemp("export") / "e"
    shutil.copytree(source, folder)

    @settings(SETTINGS, max_examples=40)
    @given(data=damaged_json(original))
    def check(data):
        (folder / "export.json").write_bytes(data)
        door(lambda f: Predictor.load(f, backend="onnx"), folder, "export.json", str(folder))

    check()


# --- a PaddleNLP or checkpoint folder: config.json, and links in it ---------------------------------------------


def test_model_config_under_damage(tiny_checkpoint):
    from senti.toolkit.training.models import folder_config

    checkpoint, _ = tiny_checkpoint
    original = json.loads((checkpoint / "config.json").read_text(encoding="utf-8"))

    @settings(SETTINGS, max_examples=150)
    @given(data=damaged_json(original))
    def check(data):
        (checkpoint / "config.json").write_bytes(data)
        door(folder_config, checkpoint, "config.json", str(checkpoint))

    check()


@pytest.mark.parametrize("name", ["config.json", "vocab.txt"])
def test_a_link_out_of_a_model_folder_is_refused(tiny_checkpoint, tmp_path, name):
    from senti.toolkit.training.models import folder_config

    checkpoint, _ = tiny_checkpoint
    outside = tmp_path / "elsewhere"
    outside.write_bytes((checkpoint / name).read_bytes())
    (checkpoint / name).unlink()
    os.symlink(outside, checkpoint / name)
    with pytest.raises(SentiError) as err:
        folder_config(checkpoint)
    one_line_naming(err.value, name)


# --- a pretraining corpus -------------------------------------------------------------------------------------


def test_a_corpus_under_damage(tmp_path_factory):
    from senti.toolkit.data.corpus import corpus_texts

    original = "\n".join(t for _, t in synthetic_rows(30, seed=4)).encode()
    path = tmp_path_factory.mktemp("corpus") / "corpus.txt"

    @settings(SETTINGS, max_examples=80)
    @given(data=damaged_bytes(original))
    def check(data):
        path.write_bytes(data)
        door(lambda p: [len(t) for t, _ in corpus_texts(str(p))], path)

    check()


# --- senti label: the picks and the label log -----------------------------------------------------------------


def _picks(folder: Path) -> Path:
    lines = [json.dumps({"id": str(i), "text": t, "guess": lab, "confidence": 0.7}, ensure_ascii=False)
             for i, (lab, t) in enumerate(synthetic_rows(8, seed=2))]
    path = folder / "picks.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def damaged_jsonl(original: bytes):
    """A JSONL file's bytes damaged, or its first record's fields (damaged_json) as the whole file."""
    return damaged_bytes(original) | damaged_json(json.loads(original.splitlines()[0]))


def test_picks_under_damage(tmp_path_factory):
    from senti.toolkit.surge.labeling import read_picks

    path = _picks(tmp_path_factory.mktemp("picks"))

    @settings(SETTINGS, max_examples=120)
    @given(data=damaged_jsonl(path.read_bytes()))
    def check(data):
        path.write_bytes(data)
        door(read_picks, path)

    check()


def test_a_label_log_under_damage(tmp_path_factory):
    from senti.toolkit.data.label_log import resolve_log
    from senti.toolkit.surge.labeling import LabelJob, read_picks

    folder = tmp_path_factory.mktemp("log")
    picks = read_picks(_picks(folder))
    log = folder / "labels.jsonl"
    job = LabelJob(picks, ["negative", "positive"], log)
    for pick in picks[:5]:
        job.answer("tab", pick.id, "label", "positive")

    @settings(SETTINGS, max_examples=120)
    @given(data=damaged_jsonl(log.read_bytes()))
    def check(data):
        log.write_bytes(data)
        door(resolve_log, log)
        door(lambda p: LabelJob(picks, ["negative", "positive"], p), log)

    check()


# --- row files and dataset folders ----------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".tsv", ".csv", ".jsonl", ".txt"])
def test_row_files_under_damage(tmp_path_factory, suffix):
    from senti.core.rows import read_rows

    folder = tmp_path_factory.mktemp("rows")
    rows = synthetic_rows(12, seed=3)
    path = folder / f"rows{suffix}"
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps({"label": lab, "text": t}, ensure_ascii=False) + "\n" for lab, t in rows),
                        encoding="utf-8")
    elif suffix == ".txt":
        path.write_text("".join(t + "\n" for _, t in rows), encoding="utf-8")
    else:
        write_rows(path, rows, header=("label", "text"))
    original = path.read_bytes()

    @settings(SETTINGS, max_examples=60)
    @given(data=damaged_bytes(original))
    def check(data):
        path.write_bytes(data)
        door(lambda p: [(r.line, r.error) for r in read_rows(p)], path)
        if suffix != ".txt":
            door(lambda p: list(read_rows(p, with_labels=True, strict=True)), path)

    check()


def test_a_dataset_folder_under_damage(tmp_path_factory):
    from senti.toolkit.data.splits import load_splits

    folder = write_folder(tmp_path_factory.mktemp("data") / "d", synthetic_rows(40, seed=1),
                          synthetic_rows(10, seed=2), synthetic_rows(10, seed=3))
    original = (folder / "train.tsv").read_bytes()

    @settings(SETTINGS, max_examples=60)
    @given(data=damaged_bytes(original))
    def check(data):
        (folder / "train.tsv").write_bytes(data)
        door(load_splits, folder, "train.tsv", str(folder))

    check()
